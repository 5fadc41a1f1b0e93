"""An alert that is a consequence of another firing on its rank is shown as such: after its
cause in the Alerts pane, with "↳ consequence of <cause>" in its row and its detail."""
from __future__ import annotations

import dataclasses
import math

import pytest

from msdoctor.core.views.alert_views import AlertView
from msdoctor.tui.alertdetail import AlertScreen, detail_text
from msdoctor.tui.app import DoctorApp
from msdoctor.tui.reader import alert_item
from msdoctor.tui.source import FixedSource

from fixed_data import NAN_ALERT, snapshot

pytestmark = pytest.mark.timeout(60)

GRAD_ALERT = dataclasses.replace(
    NAN_ALERT, alert="GradNormNonFinite", summary="Gradient norm is nan at step 120 on rank 5.",
    caused_by="LossNonFinite")


def reading():
    snap = snapshot()
    return dataclasses.replace(snap, active=(GRAD_ALERT,) + snap.active)


def test_the_reader_keeps_the_cause_of_an_api_alert():
    view = AlertView(alert="GradNormNonFinite", state="firing", severity="critical", run="r",
                     rank=0, value=math.nan, caused_by="LossNonFinite")
    assert alert_item(view).caused_by == "LossNonFinite"
    assert alert_item(AlertView.from_json(view.to_json())).caused_by == "LossNonFinite"
    assert alert_item(dataclasses.replace(view, caused_by=None)).caused_by is None


def test_the_detail_says_whose_consequence_an_alert_is():
    text = detail_text(GRAD_ALERT).plain
    assert "↳ consequence of LossNonFinite firing on the same rank" in text
    assert "consequence" not in detail_text(NAN_ALERT).plain


async def test_the_alerts_pane_lists_a_consequence_after_its_cause_and_marks_it():
    app = DoctorApp(FixedSource(lambda request: reading()), poll=False)
    async with app.run_test(size=(140, 30)) as pilot:
        await app.refresh_data()
        await pilot.press("3")
        await pilot.pause()
        pane = app.query_one("#alerts-pane")
        assert [a.alert for a in pane.shown] == ["LossNonFinite", "GradNormNonFinite",
                                                 "ThroughputBelowBaseline", "LossSpike"]
        summary_cell = pane.table.get_row_at(1)[-1]
        assert summary_cell.plain.startswith("↳ consequence of LossNonFinite: Gradient norm")
        note = str(app.query_one("#alerts-summary").render())
        assert "1 firing as consequences of another alert" in note
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, AlertScreen)
        assert "↳ consequence of LossNonFinite" in str(app.screen.query_one("#alert-body").render())

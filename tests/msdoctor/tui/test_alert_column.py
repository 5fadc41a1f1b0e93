"""The ALERTS column: most severe first, and a critical alert visible at every width."""
from __future__ import annotations

from dataclasses import replace

import pytest

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.columns import COLUMNS, alerts_text, fit
from msdoctor.tui.model import by_severity, judge
from msdoctor.tui.ranktable import RankTable
from msdoctor.tui.source import FixedSource

from fixed_data import NAN_ALERT, SLOW_ALERT, rank_row, snapshot

pytestmark = pytest.mark.timeout(60)

STARVED = replace(SLOW_ALERT, alert="DataLoaderStarved", rank=5, state="firing")
GRAD = replace(NAN_ALERT, alert="GradNormNonFinite", severity="warning")
THREE = (STARVED, GRAD, NAN_ALERT)          # alphabetical order hid LossNonFinite


def three_alerts():
    snap = snapshot()
    rows = judge([rank_row(r, nan=(r == 5), active=THREE) for r in range(8)])
    return replace(snap, ranks=tuple(rows), active=THREE)


def test_alert_names_are_ordered_by_severity_then_name():
    names, severities = by_severity(THREE)
    assert names == ("LossNonFinite", "DataLoaderStarved", "GradNormNonFinite")
    assert severities == ("critical", "warning", "warning")


def test_a_narrow_alerts_cell_falls_back_to_the_first_name_then_to_counts_per_severity():
    row = rank_row(5, nan=True, active=THREE)
    assert alerts_text(row, 80) == "LossNonFinite,DataLoaderStarved,GradNormNonFinite"
    assert alerts_text(row, 20) == "LossNonFinite +2"
    assert alerts_text(row, 10) == "1C 2W"


@pytest.mark.parametrize("width", [60, 80, 100, 120, 160, 200])
def test_the_layout_leaves_the_alerts_column_room_inside_the_screen(width):
    layout = fit(COLUMNS, width)
    assert layout[-1][0].key == "alerts"
    assert sum(w for _, w in layout) <= max(width, sum(w for c, w in layout if not c.drop) + 8)
    assert [c.key for c, _ in layout][:3] == ["rank", "health", "step"]


@pytest.mark.parametrize("size,shown", [((80, 24), "1C 2W"),
                                        ((160, 45), "LossNonFinite,DataLoaderStarved,GradNorm")])
async def test_the_critical_alert_is_on_screen_in_the_rank_table(size, shown):
    app = DoctorApp(FixedSource(three_alerts()), poll=False)
    async with app.run_test(size=size) as pilot:
        await app.refresh_data()
        await pilot.pause()
        table = app.query_one(RankTable)
        line = table.render_line(1 + [r.rank for r in table.rows].index(5)).text
        assert shown in line
        assert len(line.rstrip()) <= size[0]

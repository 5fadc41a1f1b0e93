"""The overview puts the worst rank's curves in the room a short rank table leaves."""
from __future__ import annotations

import pytest

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.overview import Overview
from msdoctor.tui.source import FixedSource

from fixed_data import snapshot

pytestmark = pytest.mark.timeout(60)


def app_for(n_ranks: int) -> DoctorApp:
    return DoctorApp(FixedSource(lambda request: snapshot(
        n_ranks=n_ranks, charts=(request.chart_ranks or (5,)) if request.charts else None)),
        poll=False)


async def test_a_few_ranks_on_a_160x45_screen_show_the_worst_rank_s_curves():
    app = app_for(8)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.refresh_data()
        await pilot.pause()
        overview = app.query_one(Overview)
        assert overview.wants_curves and app.request().curves and app.request().charts
        await app.refresh_data()
        await pilot.pause()
        loss = app.query_one("#curve-loss")
        assert loss.display and loss.size.height >= 8 and loss.plot.lines
        assert "×" in str(loss.render())                      # rank 5's NaN steps
        assert "rank 5" in str(app.query_one("#curves-title").render())
        assert app.query_one("#ranks").size.height == 9       # the header and 8 ranks


async def test_1024_ranks_keep_the_whole_pane_for_the_table_and_fetch_no_series():
    app = app_for(1024)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.refresh_data()
        await pilot.pause()
        assert not app.query_one(Overview).wants_curves
        assert not app.request().charts
        assert not app.query_one("#curves").display

"""Charts: the wall-clock axis shows a hang the step axis hides; + and - zoom to the last steps."""
from __future__ import annotations

import re
import time

import pytest

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.chartpane import zoomed
from msdoctor.tui.source import EmbeddedSource

from spool_factory import append_steps, write_run

pytestmark = pytest.mark.timeout(120)
HANG_S = 2800.0


@pytest.fixture(scope="module")
def hung_run(tmp_path_factory):
    """One rank: 300 steps, a ~2800 s hang, then 20 more steps."""
    run_dir = tmp_path_factory.mktemp("hung") / "run"
    now = time.time()
    write_run(run_dir, ranks=(0,), steps=300, t0=now - 3000.0)
    append_steps(run_dir, "run-a", 0, 301, 20, t=now - 3000.0 + 150.0 + HANG_S)
    return run_dir


def test_zoom_levels_step_in_and_out_and_0_shows_everything():
    assert zoomed(None, 1) == 2000 and zoomed(2000, -1) is None and zoomed(None, -1) is None
    assert zoomed(50, 1) == 20 and zoomed(20, 1) == 20 and zoomed(200, 0) is None


async def test_t_puts_the_charts_on_a_wall_clock_axis_where_the_hang_is_a_gap(hung_run):
    app = DoctorApp(EmbeddedSource(hung_run), poll=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await app.refresh_data()
        await pilot.pause()
        chart = app.query_one("#chart-loss")
        steps = chart.plot.lines[0].steps
        assert max(b - a for a, b in zip(steps, steps[1:])) <= 5       # a step axis: no gap
        await pilot.press("t")
        await pilot.pause()
        assert chart.plot.time_axis
        times = chart.plot.lines[0].steps
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert max(gaps) > 0.9 * HANG_S                                 # the hang, in seconds
        axis = str(chart.render()).splitlines()[-1]
        assert len(re.findall(r"\d\d:\d\d:\d\d", axis)) == 2, axis
        assert "wall-clock axis" in str(app.query_one("#chart-note").render())


async def test_plus_zooms_to_the_last_steps_and_0_shows_them_all_again(hung_run):
    app = DoctorApp(EmbeddedSource(hung_run), poll=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await app.refresh_data()
        assert app.reading.charts.series["loss"][0][0][0] == 1
        await pilot.press("plus", "plus", "plus", "plus")                # 2000 1000 500 200
        assert app.chart_window == 200 and app.request().chart_window == 200
        await app.refresh_data()
        await pilot.pause()
        steps = app.reading.charts.series["loss"][0][0]
        assert steps[0] == 121 and steps[-1] == 320
        assert "last 200 steps" in str(app.query_one("#chart-note").render())
        await pilot.press("0")
        await app.refresh_data()
        assert app.chart_window is None and app.reading.charts.series["loss"][0][0][0] == 1

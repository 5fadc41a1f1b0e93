"""Pilot tests of the TUI's behaviour over fixed snapshots (no network, no clock)."""
from __future__ import annotations

import pytest
from textual.widgets import Input, TabbedContent

from msdoctor.tui.alertdetail import AlertScreen
from msdoctor.tui.app import DoctorApp
from msdoctor.tui.helpscreen import HelpScreen
from msdoctor.tui.ranktable import RankTable
from msdoctor.tui.source import FixedSource

from fixed_data import NAN_FIX, snapshot

pytestmark = pytest.mark.timeout(60)


def app_with(snap=None, **kwargs) -> DoctorApp:
    source = FixedSource(snap if snap is not None else
                         (lambda request: snapshot(charts=request.chart_ranks or (5,)
                                                   if request.charts else None)))
    return DoctorApp(source, poll=False, **kwargs)


async def test_tab_moves_between_overview_charts_alerts_logs_checkpoints_layers_and_back():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        assert await app.refresh_data()
        assert app.pane == "overview"
        await pilot.press("tab")
        assert app.pane == "charts"
        await pilot.press("tab")
        assert app.pane == "alerts"
        await pilot.press("tab")
        assert app.pane == "logs"
        await pilot.press("tab")
        assert app.pane == "checkpoints"
        await pilot.press("tab")
        assert app.pane == "layers"
        await pilot.press("tab")
        assert app.pane == "overview"
        await pilot.press("shift+tab")
        assert app.pane == "layers"
        await pilot.press("1")
        assert app.pane == "overview"


async def test_the_rank_table_lists_every_rank_and_the_header_names_the_worst():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        await pilot.pause()
        table = app.query_one(RankTable)
        assert [r.rank for r in table.rows] == list(range(8))
        header = str(app.query_one("#run-header").render())
        assert "llama-tiny" in header and "step 121/1000" in header
        assert "1 firing" in header and "worst rank 5" in header
        await pilot.press("w")
        assert table.cursor_rank == 5


async def test_slash_filters_the_ranks_and_escape_shows_them_all_again():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        table = app.query_one(RankTable)
        await pilot.press("slash")
        assert app.query_one("#filter", Input).has_focus
        await pilot.press("2", "-", "4")
        assert [r.rank for r in table.rows] == [2, 3, 4]
        await pilot.press("enter")
        assert table.has_focus and [r.rank for r in table.rows] == [2, 3, 4]
        await app.refresh_data()        # the filter survives a refresh
        assert [r.rank for r in table.rows] == [2, 3, 4]
        await pilot.press("escape")
        assert len(table.rows) == 8


async def test_filtering_by_nan_or_an_alert_name_finds_the_sick_ranks():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        table = app.query_one(RankTable)
        app.filter_ranks("nan")
        assert [r.rank for r in table.rows] == [5]
        app.filter_ranks("throughput")
        assert [r.rank for r in table.rows] == [3]
        app.filter_ranks("alert")
        assert [r.rank for r in table.rows] == [3, 5]
        await pilot.pause()


async def test_sorting_by_health_puts_the_worst_rank_first_and_s_cycles_columns():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        table = app.query_one(RankTable)
        table.sort_by("health")
        assert [r.rank for r in table.rows][:2] == [5, 3]
        table.sort_by("step_time_s", reverse=True)
        assert table.rows[0].rank == 3
        await pilot.press("s")
        assert table.sort_key != "step_time_s"


async def test_clicking_a_column_header_sorts_by_that_column():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        await pilot.pause()
        table = app.query_one(RankTable)
        before = [c.key for c in table.columns].index("loss")
        x = sum(c.width for c in table.columns[:before]) + 2      # inside the LOSS header
        await pilot.click(RankTable, offset=(x, 0))
        assert table.sort_key == "loss"


async def test_enter_on_a_rank_opens_its_charts_with_alert_markers():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        table = app.query_one(RankTable)
        table.move_to(5)
        await pilot.press("enter")
        await pilot.pause()                 # the table's Selected message reaches the app
        assert app.pane == "charts" and app.chart_ranks == (5,)
        assert app.request().charts and app.request().chart_ranks == (5,)
        await app.refresh_data()
        await pilot.pause()
        chart = app.query_one("#chart-loss")
        assert chart.plot.markers == (120,)
        assert "┊" in str(chart.render()) and "×" in str(chart.render())


async def test_typing_ranks_in_the_chart_box_picks_them():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        await pilot.press("2")
        await pilot.press("slash")
        assert app.query_one("#chart-ranks", Input).has_focus
        await pilot.press("1", "space", "4", "enter")
        await pilot.pause()
        assert app.chart_ranks == (1, 4)


async def test_opening_an_alert_shows_its_summary_value_cause_fix_and_runbook():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        await pilot.press("3")
        await pilot.pause()
        assert app.query_one(TabbedContent).get_tab("alerts").label.plain == "Alerts (1)"
        await pilot.press("enter")         # the first row: the firing critical alert
        await pilot.pause()
        assert isinstance(app.screen, AlertScreen)
        body = str(app.screen.query_one("#alert-body").render())
        for text in ("LossNonFinite", "Loss is nan at step 120 on rank 5.", "value nan",
                     "fp16 overflow", NAN_FIX, "docs/runbook.md#lossnonfinite"):
            assert text in body
        await pilot.press("a")
        assert NAN_FIX and ("LossNonFinite", "run-a", 5) in app.marks.acked
        await pilot.press("escape")
        assert not isinstance(app.screen, AlertScreen)


async def test_silencing_an_alert_hides_it_locally_until_shown_again():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        await pilot.press("3")
        pane = app.query_one("#alerts-pane")
        assert [a.alert for a in pane.shown] == ["LossNonFinite", "ThroughputBelowBaseline",
                                                 "LossSpike"]
        await pilot.press("x")
        assert [a.alert for a in pane.shown] == ["ThroughputBelowBaseline", "LossSpike"]
        await app.refresh_data()          # stays silenced across refreshes
        assert len(pane.shown) == 2
        await pilot.press("v")
        assert len(pane.shown) == 3


async def test_the_alerts_table_is_built_when_its_pane_opens_not_while_it_is_hidden():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        pane = app.query_one("#alerts-pane")
        assert pane.table.row_count == 0            # hidden: no rebuild on every refresh
        await pilot.press("3")
        assert pane.table.row_count == 3
        await pilot.press("1")
        await app.refresh_data()
        await pilot.press("3")
        assert pane.table.row_count == 3


async def test_the_alert_filter_matches_names_and_summaries():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        await pilot.press("3", "slash")
        await pilot.press(*"spike")
        assert [a.alert for a in app.query_one("#alerts-pane").shown] == ["LossSpike"]


async def test_question_mark_opens_help_and_q_quits():
    app = app_with()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
    assert app.return_code == 0


async def test_the_command_palette_offers_the_tui_commands():
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Jump to the worst rank" in titles and "Sort ranks by LOSS" in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "CommandPalette"


async def test_a_run_without_events_says_how_to_start_the_hooks(tmp_path):
    from msdoctor.tui.source import EmbeddedSource

    app = DoctorApp(EmbeddedSource(tmp_path), poll=False)
    async with app.run_test(size=(80, 24)) as pilot:
        assert await app.refresh_data()
        await pilot.pause()
        text = str(app.query_one("#empty").render())
        assert "DoctorCallback" in text and str(tmp_path) in text
        assert app.query_one("#empty").display and not app.query_one(RankTable).display


async def test_a_terminal_that_is_too_small_gets_a_message_not_a_crash():
    app = app_with()
    async with app.run_test(size=(40, 10)) as pilot:
        await app.refresh_data()
        await pilot.pause()
        assert app.screen.has_class("-too-small")
        assert "Terminal too small (40×10)" in str(app.query_one("#too-small").render())
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not app.screen.has_class("-too-small")


async def test_a_failing_source_shows_a_banner_and_keeps_the_last_data():
    source = FixedSource(snapshot())
    app = DoctorApp(source, poll=False)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await app.refresh_data()
        source.fail = "cannot reach the sidecar at http://127.0.0.1:9: Connection refused"
        assert not await app.refresh_data()
        await pilot.pause()
        banner = app.query_one("#banner")
        assert banner.display and "Connection refused" in str(banner.render())
        assert "Retrying" in str(banner.render())
        assert len(app.query_one(RankTable).rows) == 8
        source.fail = None
        assert await app.refresh_data()
        await pilot.pause()
        assert not banner.display and app.error is None


async def test_1024_ranks_render_and_the_cursor_reaches_the_last_one():
    app = app_with(snapshot(n_ranks=1024))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.refresh_data()
        await pilot.pause()
        table = app.query_one(RankTable)
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_rank == 1023
        assert int(table.scroll_offset.y) > 1000
        await pilot.press("w")
        await pilot.pause()
        assert table.cursor_rank == 5 and int(table.scroll_offset.y) <= 5


async def test_sparklines_are_fetched_only_while_the_rank_table_shows_and_again_on_return():
    source = FixedSource(lambda request: snapshot(charts=(5,) if request.charts else None))
    app = DoctorApp(source, refresh_s=3600, poll=True)      # fetches on start and on switches
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert source.requests[-1].spark_signal == "loss"
        asked = len(source.requests)
        await pilot.press("2")
        await app.workers.wait_for_complete()
        assert app.pane == "charts" and len(source.requests) > asked
        assert source.requests[-1].charts and source.requests[-1].spark_signal is None
        asked = len(source.requests)
        await pilot.press("1")
        await app.workers.wait_for_complete()
        assert app.pane == "overview" and len(source.requests) > asked
        assert source.requests[-1].spark_signal == "loss"

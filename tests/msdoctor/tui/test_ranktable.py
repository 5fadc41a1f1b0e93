"""The rank table draws each visible line once per refresh, and never shows a line drawn
for older data, another cursor position or another width."""
from __future__ import annotations

from dataclasses import replace

import pytest

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.model import Reading
from msdoctor.tui.ranktable import RankTable
from msdoctor.tui.source import FixedSource

from fixed_data import snapshot

pytestmark = pytest.mark.timeout(60)


def with_loss(snap: Reading, rank: int, loss: float) -> Reading:
    rows = tuple(replace(r, values={**r.values, "loss": loss}) if r.rank == rank else r
                 for r in snap.ranks)
    return replace(snap, ranks=rows)


def line_text(table: RankTable, y: int) -> str:
    return "".join(segment.text for segment in table.render_line(y))


async def test_each_visible_line_is_drawn_once_per_refresh_however_often_the_screen_paints():
    app = DoctorApp(FixedSource(None), poll=False)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(RankTable)
        drawn = []
        row = table._row
        table._row = lambda r, cursor: drawn.append(r.rank) or row(r, cursor)
        app.show_reading(snapshot(n_ranks=200))
        await pilot.pause()
        app.screen._compositor.render_update(full=True)
        app.screen._compositor.render_update(full=True)
        visible = table.scrollable_content_region.height - 1
        assert 0 < len(drawn) <= visible and len(set(drawn)) == len(drawn)


async def test_a_refresh_a_cursor_move_and_a_resize_redraw_the_lines_they_change():
    app = DoctorApp(FixedSource(None), poll=False)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(RankTable)
        snap = snapshot(n_ranks=20)
        app.show_reading(snap)
        await pilot.pause()
        assert "7.125" not in line_text(table, 1)                   # rank 0's loss: 2
        app.show_reading(with_loss(snap, 0, 7.125))
        await pilot.pause()
        assert "7.125" in line_text(table, 1)
        cursor = table.render_line(1)
        await pilot.press("down")
        assert table.render_line(1) != cursor                        # the cursor left rank 0
        assert table.render_line(2).text != cursor.text
        wide = line_text(table, 0)
        await pilot.resize_terminal(90, 30)
        await pilot.pause()
        assert line_text(table, 0) != wide and len(line_text(table, 0).rstrip()) <= 90

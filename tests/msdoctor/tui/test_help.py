"""The help screen fits an 80-column terminal: no line wraps mid-phrase."""
from __future__ import annotations

import pytest
from textual.widgets import Static

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.helpscreen import HELP, HelpScreen
from msdoctor.tui.source import FixedSource

from fixed_data import snapshot

pytestmark = pytest.mark.timeout(60)


async def test_every_help_line_fits_an_80_column_terminal_without_wrapping():
    app = DoctorApp(FixedSource(snapshot()), poll=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        body = app.screen.query_one(Static)
        assert body.size.height == len(HELP.splitlines())      # one screen row per line
        assert body.size.width >= max(len(line) for line in body.render().plain.splitlines())

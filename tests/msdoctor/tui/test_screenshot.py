"""The palette's Screenshot saves into the run directory (or the working directory)."""
from __future__ import annotations

import pytest

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.source import EmbeddedSource, FixedSource

from fixed_data import snapshot

pytestmark = pytest.mark.timeout(180)


async def take_screenshot(app, pilot) -> None:
    """Run the palette's own "Screenshot" command (Textual's entry, our delivery)."""
    command = next(c for c in app.get_system_commands(app.screen) if c.title == "Screenshot")
    command.callback()
    for _ in range(600):                    # the palette delivers it from a 0.1 s timer; a busy
                                            # machine may take far longer (liveness only)
        await pilot.pause(0.1)
        if app.last_screenshot and any(app.last_screenshot in n.message
                                       for n in app._notifications):
            return                          # saved, and its notice (a message) handled


async def test_the_palette_screenshot_lands_in_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home-without-downloads"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    app = DoctorApp(EmbeddedSource(run_dir), poll=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.refresh_data()
        await take_screenshot(app, pilot)
        saved = [p for p in run_dir.iterdir() if p.suffix == ".svg"]
        assert len(saved) == 1 and app.last_screenshot == str(saved[0])
        assert "<svg" in saved[0].read_text()[:200]
        assert any(str(saved[0]) in n.message for n in app._notifications)


async def test_without_a_run_directory_the_screenshot_goes_to_the_working_directory(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = DoctorApp(FixedSource(snapshot()), poll=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.refresh_data()
        await take_screenshot(app, pilot)
        assert [p.parent for p in tmp_path.glob("*.svg")] == [tmp_path]


async def test_a_screenshot_folder_that_cannot_be_written_is_named_in_an_error(tmp_path):
    app = DoctorApp(FixedSource(snapshot()), poll=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.refresh_data()
        assert app.deliver_screenshot(path=str(tmp_path / "missing")) is None
        await pilot.pause()
        assert any("Cannot save a screenshot in" in n.message and "missing" in n.message
                   for n in app._notifications)

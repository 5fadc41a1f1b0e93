"""Shared fixtures of the TUI tests: helper imports and no cursor blink (stable snapshots)."""
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]
for path in (str(TESTS.parent), str(TESTS), str(Path(__file__).resolve().parent)):
    if path not in sys.path:
        sys.path.append(path)


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch):
    from textual.widgets import Input
    monkeypatch.setattr(Input, "cursor_blink", False, raising=False)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run ``async def`` tests with asyncio.run (no asyncio plugin is installed)."""
    import asyncio
    import inspect

    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None

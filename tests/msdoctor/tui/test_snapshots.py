"""Snapshot tests of the main screens (pytest-textual-snapshot), over fixed data.

Update the SVGs only after looking at them:
``pytest tests/msdoctor/tui/test_snapshots.py --snapshot-update``.
"""
from __future__ import annotations

import pytest

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.source import FixedSource

from fixed_data import snapshot

pytestmark = pytest.mark.timeout(120)


def make_app(**kwargs) -> DoctorApp:
    return DoctorApp(FixedSource(lambda request: snapshot(
        charts=(request.chart_ranks or (5,)) if request.charts else None, **kwargs)), poll=False)


async def loaded(pilot) -> None:
    await pilot.app.refresh_data()
    await pilot.pause()


def test_overview_in_an_80x24_terminal(snap_compare):
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=loaded)


def test_overview_sorted_worst_first(snap_compare):
    async def run_before(pilot):
        await loaded(pilot)
        pilot.app.sort_by("health")
        await pilot.pause()
    assert snap_compare(make_app(), terminal_size=(100, 24), run_before=run_before)


def test_charts_of_the_rank_with_the_nan(snap_compare):
    async def run_before(pilot):
        await pilot.press("2")
        await loaded(pilot)
    assert snap_compare(make_app(), terminal_size=(100, 34), run_before=run_before)


def test_an_opened_alert_shows_cause_and_fix(snap_compare):
    async def run_before(pilot):
        await loaded(pilot)
        await pilot.press("3", "enter")
        await pilot.pause()
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=run_before)


def test_a_terminal_too_small(snap_compare):
    assert snap_compare(make_app(), terminal_size=(50, 12), run_before=loaded)


def test_overview_of_a_few_ranks_with_the_worst_rank_s_curves_at_160x45(snap_compare):
    async def run_before(pilot):
        await loaded(pilot)
        await loaded(pilot)             # the second refresh brings the curves
    assert snap_compare(make_app(), terminal_size=(160, 45), run_before=run_before)


def test_help_fits_an_80x24_terminal(snap_compare):
    async def run_before(pilot):
        await pilot.press("question_mark")
        await pilot.pause()
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=run_before)

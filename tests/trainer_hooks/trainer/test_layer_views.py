"""The per-layer views on a real run of the bundled trainer (block 0 NaN at 22, block 1's
gradients x1000 at 30, block 0 frozen): the TUI's layer x step heat map, driven with Textual's
pilot over the run directory, at 80x24 and 200x60."""
from __future__ import annotations

import asyncio
import io

import pytest
from rich.console import Console

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.layerpane import CULPRIT, LayersPane, heat_map
from msdoctor.tui.source import EmbeddedSource

pytestmark = pytest.mark.slow


def screen_text(view, signal: str, width: int) -> list:
    console = Console(file=io.StringIO(), width=width, color_system=None, record=True)
    console.print(heat_map(view, signal, width))
    return console.export_text().splitlines()


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
def test_the_heat_map_shows_the_culprit_blocks_and_the_first_bad_step(runs, size):
    asyncio.run(drive(runs["layers"], size))


async def drive(run_dir, size) -> None:
    app = DoctorApp(EmbeddedSource(run_dir), poll=False)
    async with app.run_test(size=size) as pilot:
        await pilot.press("6")
        assert app.pane == "layers"
        assert await app.refresh_data()
        await pilot.pause()
        pane = app.query_one(LayersPane)
        view = pane.view
        assert view is not None and view.rank == 0
        assert view.names[:3] == ("embedding", "layers.0", "layers.1")
        assert view.first_nonfinite == 22
        assert {"layers.0", "layers.1"} <= set(view.culprits())
        spike = [m for m in view.marks if m.alert == "GradNormSpike"]
        assert [(m.first_step, m.layers) for m in spike] == [(30, ("layers.1",))]
        width = pane.size.width
        assert 0 < width <= size[0]
        lines = screen_text(view, pane.signal, width)
        assert all(len(line) <= width for line in lines)
        assert len(lines) <= size[1] - 4               # the whole map fits below the tabs
        assert "first non-finite: step 22" in lines[0]
        assert any(line.startswith("▼ 30 layers.1: GradNormSpike") for line in lines)
        acts = screen_text(view, "act_max", width)
        ruler = next(line for line in acts if line.strip() and set(line) <= {" ", "▼"})
        block0 = next(line for line in acts if line.strip().startswith("layers.0 "))
        axis = next(line for line in acts if line.strip().startswith("1 "))
        at = axis.index("1") + view.steps.index(22)       # the column of step 22
        assert ruler[at] == "▼" and block0[at] == "×" and block0[at - 1] == "█"
        highlighted = [t.plain.split()[0] for t in heat_map(view, "act_max", width).renderables
                       if t.spans and str(t.spans[0].style) == CULPRIT]
        assert highlighted == ["layers.0", "layers.1"]
        await pilot.press("s")
        assert pane.signal == "act_max"


def test_weight_norms_come_with_the_update_ratios_at_sampled_steps(runs):
    from trainer_runs import events

    sampled = [e for e in events(runs["layers"]) if e["type"] == "layers" and "update_ratio" in e]
    assert sampled, "no sampled step in the run"
    for e in sampled:
        norms = e["weight_norm"]
        assert len(norms) == len(e["names"])
        measured = [float(v) for v in norms if v is not None]
        assert measured and all(0 < v < 1e4 for v in measured)
        assert all(n is not None for n, u in zip(norms, e["update_ratio"]) if u is not None)

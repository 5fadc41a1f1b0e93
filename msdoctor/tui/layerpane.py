"""The Layers pane: a layer x step heat map of one rank (``/api/v1/runs/{run}/ranks/{rank}/layers``).

Rows are the layers in forward order, columns the newest steps that fit (one cell a step); a
cell's colour is the value on a log scale over what is shown, ``×`` a non-finite value, ``·`` not
measured. The layers the rank's alerts named are highlighted, and ``▼`` marks the first
non-finite step and the steps where those alerts began. ``s`` cycles the signal.
"""
from __future__ import annotations

import math
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

from rich.console import Group
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from msdoctor.core.format import printable

#: The signals the pane can show, in the order ``s`` cycles through them.
SIGNALS = (("grad_norm", "gradient norm"), ("act_max", "activation max |x|"),
           ("update_ratio", "update ratio"), ("weight_norm", "weight norm"))
#: Low to high (viridis); a cell is one block in one of these colours.
RAMP = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
        "#6ece58", "#b5de2b", "#fde725")
LABEL = 14              # columns for the layer names
CULPRIT = "bold black on yellow"
MARK_LINES = 4          # lines naming the alerts' layers (the newest)


def _levels(grid: Sequence[Sequence[Optional[float]]]) -> Tuple[float, float]:
    """log10 of the smallest and the largest positive finite value shown."""
    logs = [math.log10(v) for row in grid for v in row
            if v is not None and math.isfinite(v) and v > 0]
    return (min(logs), max(logs)) if logs else (0.0, 0.0)


def _cell(v: Optional[float], lo: float, hi: float) -> Text:
    if v is None:
        return Text("·", style="dim")
    if not math.isfinite(v):
        return Text("×", style="bold red")
    if v <= 0:
        return Text("█", style=RAMP[0])
    level = 0 if hi <= lo else (math.log10(v) - lo) / (hi - lo)
    return Text("█", style=RAMP[min(len(RAMP) - 1, int(level * len(RAMP)))])


def heat_map(view: Any, signal: str, width: int) -> Any:
    """The heat map of ``view`` (a ``LayersView``) for ``signal`` in ``width`` columns."""
    if view is None:
        return Text("Layer rows are read when this pane is open…", style="dim")
    title = dict(SIGNALS).get(signal, signal)
    grid_all = view.signals.get(signal)
    if not view.names or grid_all is None:
        held = ", ".join(view.signals) or "none"
        return Text(f"Rank {view.rank}: no per-layer {title} recorded (signals here: {held}). "
                    "The hooks record them with DoctorTrainOneStepCell(per_layer=True) or a "
                    "MindFormers cell with local_norm=True (docs/layers.md).", style="dim")
    label = min(LABEL, max(6, width // 5))
    cells = max(1, width - label - 2)
    steps = list(view.steps)[-cells:]
    grid = [list(row) for row in grid_all[-cells:]]
    lo, hi = _levels(grid)
    culprits = set(view.culprits())
    bad = view.first_nonfinite
    began: Dict[int, str] = {m.first_step: m.alert for m in view.marks
                             if isinstance(m.first_step, int)}
    head = Text(f"rank {view.rank} · {title} (log10) · steps {steps[0]}–{steps[-1]}",
                style="bold")
    if bad is not None:
        head.append(f" · first non-finite: step {bad}", style="bold red")
    lines: List[Text] = [head]
    named: Dict[Tuple[Any, Tuple[str, ...]], List[str]] = {}
    for mark in view.marks:
        named.setdefault((mark.first_step, mark.layers), []).append(
            mark.alert + ("" if mark.first_rank is None else f" (first rank {mark.first_rank})"))
    for (first, layers), alerts in list(named.items())[-MARK_LINES:]:
        lines.append(Text(f"▼ {first} {','.join(layers)}: {', '.join(alerts)}",
                          style="yellow", overflow="ellipsis", no_wrap=True))
    ruler = Text(" " * (label + 1))
    for step in steps:
        if step == bad:
            ruler.append("▼", style="bold red")
        elif step in began:
            ruler.append("▼", style="bold yellow")
        else:
            ruler.append(" ")
    lines.append(ruler)
    for j, name in enumerate(view.names):
        shown = printable(name)
        shown = shown if len(shown) <= label else "…" + shown[-(label - 1):]
        line = Text()
        line.append(shown.rjust(label), style=CULPRIT if name in culprits else "")
        line.append(" ")
        for row in grid:
            line.append_text(_cell(row[j] if j < len(row) else None, lo, hi))
        lines.append(line)
    axis = Text(" " * (label + 1) + str(steps[0]), style="dim")
    end = str(steps[-1])
    pad = len(steps) - len(str(steps[0])) - len(end)
    if pad > 0:
        axis.append(" " * pad + end, style="dim")
    legend = Text(" " * (label + 1))
    legend.append(f"1e{lo:+.1f} ", style="dim")
    for colour in RAMP:
        legend.append("█", style=colour)
    legend.append(f" 1e{hi:+.1f}   ", style="dim")
    legend.append("×", style="bold red")
    legend.append(" non-finite · not measured", style="dim")
    return Group(*lines, axis, legend)


class LayersPane(VerticalScroll):
    """Shows :func:`heat_map` for the latest reading; ``s`` cycles the signal."""

    can_focus = True
    BINDINGS: ClassVar[List[BindingType]] = [Binding("s", "next_signal", "Signal")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view: Any = None
        self.signal = SIGNALS[0][0]

    def compose(self) -> Any:
        yield Static("", id="layers-map")

    def show(self, view: Any) -> None:
        self.view = view
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def action_next_signal(self) -> None:
        held = [s for s, _ in SIGNALS if self.view is not None and s in self.view.signals]
        if held:
            at = held.index(self.signal) if self.signal in held else -1
            self.signal = held[(at + 1) % len(held)]
            self._draw()

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        width = self.size.width or 80
        self.query_one("#layers-map", Static).update(heat_map(self.view, self.signal, width))

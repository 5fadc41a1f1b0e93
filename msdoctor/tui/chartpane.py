"""The Charts pane: loss (raw + smoothed), grad norm, loss scale (log), throughput, memory.

The picked ranks are typed in the box on top (``0 3 7``, empty = the worst
rank) or picked with Enter in the rank table; red ``┊`` columns mark the steps
where alerts fired.
"""
from __future__ import annotations

import math
import re
from typing import Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Static

from msdoctor.core.state import WALL_TIME
from msdoctor.tui.braillechart import PALETTE, Chart, Line, Plot, smooth
from msdoctor.tui.model import ChartData

MAX_RANKS = 6
#: Zoom levels: the last this many steps (None: every step the sidecar keeps).
WINDOWS: Tuple[Optional[int], ...] = (None, 2000, 1000, 500, 200, 100, 50, 20)
#: chart id -> (title, signals in order of preference, log y, unit)
PANELS: Tuple[Tuple[str, str, Tuple[str, ...], bool, str], ...] = (
    ("loss", "loss (raw, smoothed)", ("loss",), False, ""),
    ("grad_norm", "grad norm", ("grad_norm",), False, ""),
    ("loss_scale", "loss scale (log)", ("loss_scale",), True, ""),
    ("tokens_per_s", "tokens/s/device", ("tokens_per_s",), False, ""),
    ("memory", "memory", ("mem_device_bytes", "mem_host_rss_bytes"), False, "bytes"),
)


def parse_ranks(text: str) -> Tuple[int, ...]:
    """``"0 3, 5-7"`` -> (0, 3, 5, 6, 7); ValueError naming the bad term."""
    out: List[int] = []
    for term in [t for t in re.split(r"[\s,]+", re.sub(r"\s*-\s*", "-", text.strip())) if t]:
        a, sep, b = term.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            raise ValueError(f"{term!r} is not a rank; expected numbers like 0 3 5-7")
        lo, hi = (int(a), int(b)) if sep else (int(a), int(a))
        out.extend(r for r in range(min(lo, hi), max(lo, hi) + 1) if r not in out)
    if len(out) > MAX_RANKS:
        raise ValueError(f"{len(out)} ranks picked; charts show at most {MAX_RANKS}")
    return tuple(out)


def _recorded(data: ChartData, signals: Sequence[str]) -> Optional[str]:
    for name in signals:
        per_rank = data.series.get(name, {})
        if any(any(v for v in values) for _, values in per_rank.values()):
            return name
    return None


def wall_times(data: ChartData) -> Optional[Callable[[int, Sequence[int]], List[float]]]:
    """``times(rank, steps)``: the wall-clock time of each step of ``rank`` (interpolated
    between the recorded ones), or None when no picked rank has recorded times."""
    recorded = {rank: (np.asarray(s, dtype=float), np.asarray(t, dtype=float))
                for rank, (s, t) in data.series.get(WALL_TIME, {}).items() if len(s)}
    if not recorded:
        return None

    def times(rank: int, steps: Sequence[int]) -> List[float]:
        if rank not in recorded:
            return [math.nan] * len(steps)
        known_steps, known_t = recorded[rank]
        return np.interp(np.asarray(steps, dtype=float), known_steps, known_t).tolist()

    return times


def plots(data: ChartData, time_axis: bool = False) -> Dict[str, Tuple[Plot, str]]:
    """The plot and legend of every panel, on a step axis or (``time_axis``, when times were
    recorded) a wall-clock axis that runs to the newest event, so a hang shows as a gap."""
    colors = {rank: PALETTE[i % len(PALETTE)] for i, rank in enumerate(data.ranks)}
    legend = "  ".join(f"[{colors[r]}]━[/] r{r}" for r in data.ranks)
    times = wall_times(data) if time_axis else None
    markers: Tuple[float, ...] = tuple(step for step, _alert, _sev in data.markers)
    if times is not None and data.ranks:
        markers = tuple(t for t in times(data.ranks[0], markers) if math.isfinite(t))
    out = {}
    for key, _title, signals, log, unit in PANELS:
        name = _recorded(data, signals) or signals[0]
        lines: List[Line] = []
        for rank, (steps, values) in sorted(data.series.get(name, {}).items()):
            color = colors.get(rank, "white")
            xs: Sequence[float] = steps if times is None else times(rank, steps)
            if key == "loss":
                lines.append(Line(f"r{rank}", xs, values, color, dim=True))
                lines.append(Line(f"r{rank}~", xs, smooth(values), color))
            else:
                lines.append(Line(f"r{rank}", xs, values, color))
        suffix = "" if name == signals[0] else f" ({name})"
        out[key] = (Plot(tuple(lines), log=log, markers=markers, unit=unit,
                         empty=f"no {name} recorded", time_axis=times is not None,
                         x_until=data.until if times is not None else None), legend + suffix)
    return out


def chart_note(data: ChartData, time_axis: bool) -> str:
    """What the charts show: the ranks, the window, the axis, the alert markers."""
    marks = ", ".join(f"{alert}@{step}" for step, alert, _ in data.markers[:3])
    more = f" +{len(data.markers) - 3}" if len(data.markers) > 3 else ""
    picked = " ".join(str(r) for r in data.ranks) or "none"
    window = f"last {data.window} steps" if data.window else "all steps"
    if not time_axis:
        axis = "step axis"
    elif wall_times(data) is None:
        axis = "no wall times recorded: step axis"
    else:
        axis = "wall-clock axis"
    return (f"showing {picked} · {window} · {axis}" + (f"  [red]┊[/] {marks}{more}" if marks else ""))


def zoomed(window: Optional[int], direction: int) -> Optional[int]:
    """The next zoom level: ``direction`` 1 fewer steps, -1 more, 0 every step."""
    if direction == 0:
        return None
    i = WINDOWS.index(window) if window in WINDOWS else 0
    return WINDOWS[max(0, min(len(WINDOWS) - 1, i + direction))]


class ChartsPane(Vertical):
    """Rank picker on top, a grid of charts below; ``t`` switches the x axis between steps and
    wall-clock time, ``+`` ``-`` zoom to the last N steps, ``0`` shows every step."""

    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("t", "axis", "Time axis"),
        Binding("plus,equals_sign", "zoom(1)", "Zoom in"),
        Binding("minus", "zoom(-1)", "Zoom out"),
        Binding("0", "zoom(0)", "All steps", show=False),
    ]

    class RanksPicked(Message):
        def __init__(self, ranks: Tuple[int, ...]) -> None:
            super().__init__()
            self.ranks = ranks

    class Zoomed(Message):
        """Show only the last ``window`` steps (None: all); the app fetches them."""

        def __init__(self, window: Optional[int]) -> None:
            super().__init__()
            self.window = window

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.time_axis = False
        self.window: Optional[int] = None
        self.data: Optional[ChartData] = None
        self._note: Optional[str] = None

    def action_axis(self) -> None:
        self.time_axis = not self.time_axis
        self.show(self.data)

    def action_zoom(self, direction: int) -> None:
        self.window = zoomed(self.window, direction)
        self.post_message(self.Zoomed(self.window))

    def compose(self) -> ComposeResult:
        with Horizontal(id="chart-bar"):
            yield Static("ranks", id="chart-label")
            yield Input(placeholder="0 3 5-7 (empty: worst)", id="chart-ranks", compact=True)
            yield Static("", id="chart-note")
        with Grid(id="chart-grid"):
            for key, title, *_ in PANELS:
                yield Chart(title, id=f"chart-{key}")

    def show(self, data: Optional[ChartData]) -> None:
        if data is None:
            return
        self.data = data
        for key, (plot, legend) in plots(data, self.time_axis).items():
            self.query_one(f"#chart-{key}", Chart).set_plot(plot, legend)
        note = chart_note(data, self.time_axis)
        if note != self._note:                  # the bar is one line high: laid out once
            first, self._note = self._note is None, note
            self.query_one("#chart-note", Static).update(note, layout=first)

    def pick(self, ranks: Tuple[int, ...]) -> None:
        """Show ``ranks`` in the box (the app fetches their series next refresh)."""
        self.query_one("#chart-ranks", Input).value = " ".join(str(r) for r in ranks)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "chart-ranks":
            return
        event.stop()
        try:
            ranks = parse_ranks(event.value)
        except ValueError as exc:
            self.app.notify(str(exc), title="Ranks", severity="error")
            return
        self.post_message(self.RanksPicked(ranks))

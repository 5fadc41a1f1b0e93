"""The Charts pane: loss (raw + smoothed), grad norm, loss scale (log), throughput, memory.

The picked ranks are typed in the box on top (``0 3 7``, empty = the worst
rank) or picked with Enter in the rank table; red ``┊`` columns mark the steps
where alerts fired.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Static

from msdoctor.tui.braillechart import PALETTE, Chart, Line, Plot, smooth
from msdoctor.tui.model import ChartData

MAX_RANKS = 6
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


def plots(data: ChartData) -> Dict[str, Tuple[Plot, str]]:
    """The plot and legend of every panel."""
    colors = {rank: PALETTE[i % len(PALETTE)] for i, rank in enumerate(data.ranks)}
    legend = "  ".join(f"[{colors[r]}]━[/] r{r}" for r in data.ranks)
    markers = tuple(step for step, _alert, _sev in data.markers)
    out = {}
    for key, _title, signals, log, unit in PANELS:
        name = _recorded(data, signals) or signals[0]
        lines: List[Line] = []
        for rank, (steps, values) in sorted(data.series.get(name, {}).items()):
            color = colors.get(rank, "white")
            if key == "loss":
                lines.append(Line(f"r{rank}", steps, values, color, dim=True))
                lines.append(Line(f"r{rank}~", steps, smooth(values), color))
            else:
                lines.append(Line(f"r{rank}", steps, values, color))
        suffix = "" if name == signals[0] else f" ({name})"
        out[key] = (Plot(tuple(lines), log=log, markers=markers, unit=unit,
                         empty=f"no {name} recorded"), legend + suffix)
    return out


class ChartsPane(Vertical):
    """Rank picker on top, a grid of charts below."""

    class RanksPicked(Message):
        def __init__(self, ranks: Tuple[int, ...]) -> None:
            super().__init__()
            self.ranks = ranks

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
        for key, (plot, legend) in plots(data).items():
            self.query_one(f"#chart-{key}", Chart).set_plot(plot, legend)
        marks = ", ".join(f"{alert}@{step}" for step, alert, _ in data.markers[:3])
        more = f" +{len(data.markers) - 3}" if len(data.markers) > 3 else ""
        picked = " ".join(str(r) for r in data.ranks) or "none"
        self.query_one("#chart-note", Static).update(
            f"showing {picked}" + (f"  [red]┊[/] {marks}{more}" if marks else ""))

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

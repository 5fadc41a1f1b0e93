"""The Overview pane: the run header, the rank table, and in the room a short table leaves,
the worst rank's curves (or, with no ranks yet, how to start the hooks)."""
from __future__ import annotations

from typing import Optional

from textual import events
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Static

from msdoctor.tui.braillechart import Chart
from msdoctor.tui.chartpane import plots
from msdoctor.tui.model import ChartData, Reading
from msdoctor.tui.ranktable import RankTable
from msdoctor.tui.runheader import RunHeader

#: The curves shown below a short rank table: (chart id, title).
CURVES = (("loss", "loss"), ("grad_norm", "grad norm"), ("tokens_per_s", "tokens/s/device"),
          ("loss_scale", "loss scale (log)"))
#: Rows the curves need; below this the table keeps the whole pane.
MIN_CURVES_HEIGHT = 12
HEADER_HEIGHT = 2


class Overview(Vertical):
    """Run header on top; the rank table (or how to start the hooks) below; the worst rank's
    curves in the free space when the table is short."""

    _table_height = "1fr"

    def compose(self) -> ComposeResult:
        yield RunHeader(id="run-header")
        yield Static("", id="empty")
        yield RankTable(id="ranks")
        yield Static("", id="curves-title")
        with Grid(id="curves"):
            for key, title in CURVES:
                yield Chart(title, id=f"curve-{key}")

    @property
    def table(self) -> RankTable:
        return self.query_one(RankTable)

    @property
    def wants_curves(self) -> bool:
        """True when the table leaves room for the curves (the app then fetches them)."""
        return self.has_class("-curves")

    def show(self, snap: Reading, stale: bool = False) -> None:
        self.query_one(RunHeader).show(snap.run, snap.source, stale)
        empty = not snap.ranks
        self.set_class(empty, "-empty")
        if empty:
            self.query_one("#empty", Static).update(snap.empty_hint or "No ranks yet.")
        self.table.set_rows(snap.ranks)
        self._place()

    def show_curves(self, data: Optional[ChartData]) -> None:
        """Draw the curves of ``data`` (the worst rank's series)."""
        if data is None:
            return
        drawn = plots(data)
        for key, _title in CURVES:
            plot, _legend = drawn[key]
            self.query_one(f"#curve-{key}", Chart).set_plot(plot)
        rank = " ".join(str(r) for r in data.ranks) or "-"
        self.query_one("#curves-title", Static).update(
            f"[b]rank {rank}[/b], the one most in need of a look  "
            "[dim](enter on a row: that rank's charts)[/dim]", layout=False)   # one line high

    def show_waiting(self, source: str, message: Optional[str] = None) -> None:
        self.query_one(RunHeader).show(None, source)
        self.add_class("-empty")
        self.set_class(False, "-curves")
        self.query_one("#empty", Static).update(message or f"Connecting to {source}…")

    def on_resize(self, event: events.Resize) -> None:
        self._place()

    def _place(self) -> None:
        """Give the table the lines it needs and the curves the rest, when that is enough."""
        table = self.table
        rows = len(table.rows) + 1 + (1 if table.virtual_size.width > self.size.width else 0)
        free = self.size.height - HEADER_HEIGHT - rows - 1
        room = not self.has_class("-empty") and free >= MIN_CURVES_HEIGHT
        self.set_class(room, "-curves")
        height = str(rows) if room else "1fr"
        if height != self._table_height:         # a new height means a new layout: only on change
            self._table_height = height
            table.styles.height = rows if room else "1fr"

"""The Overview pane: the run header and the rank table, or an empty state."""
from __future__ import annotations

from typing import Optional

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from msdoctor.tui.model import Reading
from msdoctor.tui.ranktable import RankTable
from msdoctor.tui.runheader import RunHeader


class Overview(Vertical):
    """Run header on top; the rank table (or how to start the hooks) below."""

    def compose(self) -> ComposeResult:
        yield RunHeader(id="run-header")
        yield Static("", id="empty")
        yield RankTable(id="ranks")

    @property
    def table(self) -> RankTable:
        return self.query_one(RankTable)

    def show(self, snap: Reading, stale: bool = False) -> None:
        self.query_one(RunHeader).show(snap.run, snap.source, stale)
        empty = not snap.ranks
        self.set_class(empty, "-empty")
        if empty:
            self.query_one("#empty", Static).update(snap.empty_hint or "No ranks yet.")
        self.table.set_rows(snap.ranks)

    def show_waiting(self, source: str, message: Optional[str] = None) -> None:
        self.query_one(RunHeader).show(None, source)
        self.add_class("-empty")
        self.query_one("#empty", Static).update(message or f"Connecting to {source}…")

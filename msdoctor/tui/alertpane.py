"""The Alerts pane: firing, pending and resolved alerts; Enter opens one.

Acknowledge (``a``) and silence (``x``) are local to this terminal: they change
what this TUI highlights and counts, never the sidecar or other receivers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, List, Optional, Sequence, Set

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Static

from msdoctor.core import format as fmt
from msdoctor.tui.model import AlertItem, AlertKey

STATE_STYLE = {"firing": "bold white on red", "pending": "black on yellow", "resolved": "green"}
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


@dataclass
class Marks:
    """Local acknowledgements and silences, by (alert, run, rank)."""

    acked: Set[AlertKey] = field(default_factory=set)
    silenced: Set[AlertKey] = field(default_factory=set)

    def toggle(self, which: str, key: AlertKey) -> bool:
        """Flip ``key`` in ``acked`` or ``silenced``; True when it is now set."""
        marks = self.acked if which == "ack" else self.silenced
        if key in marks:
            marks.discard(key)
            return False
        marks.add(key)
        return True

    def label(self, key: AlertKey) -> str:
        return "silenced" if key in self.silenced else ("acked" if key in self.acked else "")


def matches(item: AlertItem, text: str) -> bool:
    """Case-insensitive substring of the name, summary, severity, state or ``rank N``."""
    if not text:
        return True
    low = text.lower()
    hay = " ".join((item.alert, item.summary, item.severity, item.state,
                    f"rank {item.rank}" if item.rank is not None else "")).lower()
    return all(word in hay for word in low.split())


def consequence_text(item: AlertItem, style: str = "") -> Text:
    """The summary cell of an alert that is a consequence of another one on its rank."""
    return Text.assemble((f"↳ consequence of {item.caused_by}", "italic magenta"),
                         (f": {item.summary}" if item.summary else "", style or "dim"))


class AlertsPane(Vertical):
    """A table of alerts; posts :class:`AlertsPane.Opened` on Enter or a click."""

    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("a", "mark('ack')", "Ack"),
        Binding("x", "mark('silence')", "Silence"),
        Binding("v", "toggle_silenced", "Show silenced"),
    ]

    class Opened(Message):
        def __init__(self, item: AlertItem) -> None:
            super().__init__()
            self.item = item

    def __init__(self, marks: Marks, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.marks = marks
        self.items: List[AlertItem] = []
        self._signature: list = []
        self.shown: List[AlertItem] = []
        self.filter_text = ""
        self.show_silenced = False
        self._stale = False

    def compose(self) -> ComposeResult:
        yield Static("", id="alerts-summary")
        table: DataTable = DataTable(id="alerts-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("STATE", "SEV", "ALERT", "RANK", "STEP", "VALUE", "SUMMARY")
        yield table

    @property
    def table(self) -> DataTable:
        return self.query_one("#alerts-table", DataTable)

    def show(self, items: Sequence[AlertItem]) -> None:
        """Show ``items``; the table is rebuilt only when they changed (1000s of rows),
        and while the pane is hidden only when it is shown again (:meth:`flush`)."""
        items = list(items)
        signature = [(a.key, a.state, a.step, a.first_step, a.t, a.caused_by) for a in items]
        if signature == self._signature and self.table.row_count:
            return
        self.items, self._signature = items, signature
        if self._visible():
            self._redraw()
        else:
            self._stale = True

    def flush(self) -> None:
        """Draw what :meth:`show` was given while the pane was hidden."""
        if self._stale:
            self._redraw()

    def _visible(self) -> bool:
        return all(node.display for node in self.ancestors_with_self if isinstance(node, Widget))

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._redraw()

    def _redraw(self) -> None:
        self._stale = False
        table = self.table
        keep = self.shown[table.cursor_row].key if self.shown and 0 <= table.cursor_row < len(
            self.shown) else None
        self.shown = [a for a in self.items if matches(a, self.filter_text)
                      and (self.show_silenced or a.key not in self.marks.silenced)]
        table.clear()
        for a in self.shown:
            mark = self.marks.label(a.key)
            dim = "dim" if mark or a.state == "resolved" else ""
            table.add_row(
                Text(a.state, style=STATE_STYLE.get(a.state, "")),
                Text(a.severity, style=SEVERITY_STYLE.get(a.severity, "")),
                Text(a.alert + (f" ({mark})" if mark else ""), style=dim or "bold"),
                "-" if a.rank is None else str(a.rank),
                "-" if a.step is None else str(a.step),
                fmt.number(a.value, 4),
                consequence_text(a, dim) if a.caused_by else Text(a.summary, style=dim))
        if keep is not None:
            for i, a in enumerate(self.shown):
                if a.key == keep:
                    table.move_cursor(row=i, animate=False)
                    break
        firing = sum(1 for a in self.items if a.state == "firing")
        pending = sum(1 for a in self.items if a.state == "pending")
        resolved = sum(1 for a in self.items if a.state == "resolved")
        hidden = sum(1 for a in self.items if a.key in self.marks.silenced)
        note = f"{firing} firing, {pending} pending, {resolved} resolved"
        consequences = sum(1 for a in self.items if a.caused_by and a.state == "firing")
        if consequences:
            note += f" ({consequences} firing as consequences of another alert)"
        if hidden:
            note += f"; {hidden} silenced ({'shown' if self.show_silenced else 'hidden'}, v)"
        if self.filter_text:
            note += f"; filter: {self.filter_text!r}"
        if not self.items:
            note = "No alerts. Rules are evaluated on every step; alerts appear here with their fix."
        self.query_one("#alerts-summary", Static).update(   # one line high: no layout
            note + "   [dim]enter: open  a: ack  x: silence[/]", layout=False)

    def current(self) -> Optional[AlertItem]:
        row = self.table.cursor_row
        return self.shown[row] if self.shown and 0 <= row < len(self.shown) else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        item = self.current()
        if item is not None:
            self.post_message(self.Opened(item))

    def action_mark(self, which: str) -> None:
        item = self.current()
        if item is None:
            return
        on = self.marks.toggle(which, item.key)
        verb = {"ack": ("acknowledged", "unacknowledged"),
                "silence": ("silenced", "unsilenced")}[which][0 if on else 1]
        self.app.notify(f"{item.alert} on rank {item.rank} {verb} (locally)")
        self._redraw()

    def action_toggle_silenced(self) -> None:
        self.show_silenced = not self.show_silenced
        self._redraw()

"""One alert opened: summary, value, cause, fix, runbook; acknowledge or silence locally."""
from __future__ import annotations

from typing import ClassVar, List

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from msdoctor.core import format as fmt
from msdoctor.tui.alertpane import SEVERITY_STYLE, STATE_STYLE, Marks
from msdoctor.tui.model import AlertItem


def detail_text(item: AlertItem, mark: str = "") -> Text:
    """The whole alert as labelled paragraphs."""
    where = f"run {item.run}" + (f", rank {item.rank}" if item.rank is not None else "")
    steps = ""
    if item.step is not None:
        steps = f", step {item.step}"
        if item.first_step is not None and item.first_step != item.step:
            steps += f" (since step {item.first_step})"
    parts = [
        Text.assemble((f" {item.state} ", STATE_STYLE.get(item.state, "")), " ",
                      (item.severity, SEVERITY_STYLE.get(item.severity, "")), "  ",
                      (item.alert, "bold"), (f"  ({mark})" if mark else "", "dim")),
        Text(where + steps, style="dim"),
    ]
    parts[1].append(f"   value {fmt.number(item.value, 6)}")
    if item.caused_by:
        parts.append(Text.assemble((f"↳ consequence of {item.caused_by}", "italic magenta"),
                                   (" firing on the same rank: not notified on its own; the "
                                    "cause's fix comes first", "dim")))
    for label, body in (("Summary", item.summary), ("Cause", item.cause), ("Fix", item.fix),
                        ("Runbook", item.runbook_url)):
        if not body:
            continue
        parts.append(Text(label, style="bold underline" if label == "Fix" else "bold"))
        parts.append(Text(body, style="bold green" if label == "Fix" else ""))
        parts.append(Text(""))
    return Text("\n").join(parts)


class AlertScreen(ModalScreen[None]):
    """A dialog over the app; Escape closes it."""

    CSS_PATH = "alertdetail.tcss"
    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("a", "mark('ack')", "Ack"),
        Binding("x", "mark('silence')", "Silence"),
    ]

    def __init__(self, item: AlertItem, marks: Marks) -> None:
        super().__init__()
        self.item, self.marks = item, marks

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="alert-dialog") as box:
            box.border_title = f"{self.item.alert}"
            yield Static(detail_text(self.item, self.marks.label(self.item.key)), id="alert-body")
        yield Footer()

    def action_mark(self, which: str) -> None:
        self.marks.toggle(which, self.item.key)
        self.query_one("#alert-body", Static).update(
            detail_text(self.item, self.marks.label(self.item.key)))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)

"""The Logs pane: the tail of one of the run's log files (the trainer's train log, MindFormers'
``info.log`` / ``error.log`` of each rank), followed as it grows; ``[`` ``]`` pick the file."""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar, List, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import RichLog, Static

from msdoctor.core.format import printable
from msdoctor.tui.logtail import LogChunk

#: Lines kept in the view (older ones scroll away).
MAX_LINES = 2000


def line_style(line: str) -> str:
    """Errors red, warnings yellow, the rest plain."""
    if "ERROR" in line or "Traceback" in line or "Error:" in line:
        return "red"
    if "WARNING" in line or "WARN " in line:
        return "yellow"
    return ""


class LogPane(Vertical):
    """A one-line file bar over a scrolling log view."""

    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("left_square_bracket", "pick(-1)", "Prev file"),
        Binding("right_square_bracket", "pick(1)", "Next file"),
    ]

    class Picked(Message):
        """Follow the next (1) or previous (-1) log file."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    def compose(self) -> ComposeResult:
        yield Static("", id="log-bar")
        yield RichLog(id="log-view", max_lines=MAX_LINES, wrap=False, markup=False,
                      highlight=False, auto_scroll=True)

    def action_pick(self, step: int) -> None:
        self.post_message(self.Picked(step))

    def show_missing(self, why: str) -> None:
        self.query_one("#log-bar", Static).update(Text(why, style="dim"))

    def show(self, chunk: LogChunk, base: Optional[Path]) -> None:
        """Append ``chunk``'s lines (or start over) and name the file followed."""
        bar = self.query_one("#log-bar", Static)
        view = self.query_one(RichLog)
        if chunk.current is None:
            where = printable(base) if base is not None else "?"
            bar.update(Text(f"no log files in {where} yet (train.log, *.log, "
                            "work/output/log/rank_N/info.log, error.log)", style="dim"))
            view.clear()
            return
        shown = chunk.current
        if base is not None and shown.is_relative_to(base):
            shown = shown.relative_to(base)
        index = chunk.files.index(chunk.current) + 1 if chunk.current in chunk.files else 0
        bar.update(Text.assemble(("log ", "dim"), (f"{index}/{len(chunk.files)} ", "dim"),
                                 (printable(shown), "bold"),
                                 ("   [ ] other files", "dim") if len(chunk.files) > 1 else "",
                                 (f"   {chunk.problem}", "red") if chunk.problem else ""))
        if chunk.reset:
            view.clear()
        for line in chunk.lines:
            view.write(Text(line, style=line_style(line)))

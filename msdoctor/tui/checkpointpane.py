"""The Checkpoints pane: every saved checkpoint of the run, the poisoned ones and the last good
one marked (``/api/v1/runs/{run}/checkpoints``)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from msdoctor.core import format as fmt


def checkpoints_table(items: Optional[Sequence[Any]]) -> Any:
    """A table of ``CheckpointView`` items, newest last; a hint when there are none."""
    if items is None:
        return Text("Checkpoints are read when this pane is open…", style="dim")
    if not items:
        return Text("No checkpoint saved yet (the hooks report ModelCheckpoint, "
                    "CheckpointMonitor and the bundled trainer's saves).", style="dim")
    table = Table(expand=True, box=None, header_style="bold")
    for name, justify in (("rank", "right"), ("step", "right"), ("state", "left"),
                          ("size", "right"), ("save", "right"), ("path", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for c in items:
        if c.poisoned_by:
            state = Text(f"poisoned ({c.poisoned_by})", style="bold red")
        elif c.last_good:
            state = Text("last good", style="bold green")
        else:
            state = Text("ok", style="green")
        size = fmt.humanize(float(c.size_bytes)) + "B" if c.size_bytes else "-"
        save = fmt.duration(c.save_s) if c.save_s is not None else "-"
        table.add_row(str(c.rank), str(c.step), state, size, save, c.path or "-")
    return table


class CheckpointsPane(Static):
    """Shows :func:`checkpoints_table` for the latest reading."""

    can_focus = True

    def show(self, items: Optional[Sequence[Any]]) -> None:
        self.update(checkpoints_table(items))

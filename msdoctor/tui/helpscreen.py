"""``?``: the keys, the filter syntax and what the colours mean."""
from __future__ import annotations

from typing import ClassVar, List

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]Panes[/b]     tab / shift+tab next / previous · 1 overview · 2 charts · 3 alerts · 4 checkpoints
[b]Anywhere[/b]  / filter · esc clear filter · ctrl+p command palette · ? help · q quit
          R next run · ctrl+r refresh now

[b]Overview[/b]  ↑↓ pgup pgdn home end move · enter charts of the rank
          s next sort column · r reverse · click a header to sort by it
          w jump to the worst rank (alerts, failures, NaN, furthest from the median)
[b]Charts[/b]    type ranks in the box (0 3 5-7) and press enter; empty = worst rank
          red ┊ = a step where an alert fired · red × = a non-finite value
[b]Alerts[/b]    enter open (summary, value, cause, fix, runbook)
          a acknowledge · x silence · v show silenced (local to this terminal)

[b]Filter[/b] (overview) terms separated by spaces, a rank matches any of them:
  7 · 0-15 · running failed completed stopped · bad warn stale ok done ·
  alert (any active alert) · nan (non-finite loss) · text (alert name)
[b]Status colour[/b]  [red]●[/] critical alert, failed or NaN  [yellow]●[/] other alert
  [magenta]◌[/] no events lately  [green]●[/] healthy  [blue]✓[/] completed
[b]Columns[/b]  LOSS · GNORM grad norm · SCALE loss scale · TOK/S tokens/s/device ·
  STEP T step time · WAIT data-wait share · MEM device memory (host RSS on CPU) ·
  UPD update ratio |Δw|/|w| · LOSS~ recent loss · ALERTS active alerts

[dim]escape closes this help[/dim]"""


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "helpscreen.tcss"
    BINDINGS: ClassVar[List[BindingType]] = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-dialog") as box:
            box.border_title = "msdoctor tui: help"
            yield Static(HELP)

    def action_close(self) -> None:
        self.dismiss(None)

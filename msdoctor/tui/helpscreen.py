"""``?``: the keys, the filter syntax and what the colours mean."""
from __future__ import annotations

from typing import ClassVar, List

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]Panes[/b]     tab shift+tab · 1 overview · 2 charts · 3 alerts
          4 logs · 5 checkpoints · 6 layers
[b]Anywhere[/b]  / filter · esc clear it · ctrl+p palette · ? help · q quit
          R next run · ctrl+r refresh now
          palette "Screenshot": an SVG in the run directory
[b]Overview[/b]  ↑↓ pgup pgdn home end move · enter the rank's charts
          s next sort column · r reverse · click a header to sort
          w worst rank (alerts, failures, NaN, far from the median)
          below a short table: the worst rank's curves
[b]Charts[/b]    type ranks in the box (0 3 5-7), enter; empty = worst rank
          t step / wall-clock axis · + - zoom (last N steps) · 0 all
          red ┊ an alert fired · red × a non-finite value
[b]Alerts[/b]    enter open it (summary, value, cause, fix, runbook)
          a acknowledge · x silence · v show silenced (local marks)
[b]Logs[/b]      [ ] previous / next log file · end follow the tail
[b]Layers[/b]    layer x step heat map of the picked (else worst) rank
          s next signal · [yellow]name[/] named by an alert · ▼ first bad step

[b]Filter[/b] (overview): terms separated by spaces; a rank matches any:
  7 · 0-15 · running failed completed stopped · bad warn stale ok done
  alert (any active alert) · nan (non-finite loss) · text (alert name)
[b]Status[/b]  [red]●[/] critical, failed or NaN · [yellow]●[/] other alert
  [magenta]◌[/] no events lately · [green]●[/] healthy · [blue]✓[/] completed
[b]Columns[/b] AGE time since the last step (grey values: stale) · LOSS
  GNORM grad norm · SCALE loss scale · TOK/S tokens/s per device
  STEP T step time · WAIT data-wait share · MEM memory (RSS on CPU)
  UPD update ratio |Δw|/|w| · LOSS~ recent loss
  ALERTS most severe first; when narrow 2C 1W = 2 critical, 1 warning
  (narrow terminals hide UPD, then MEM, SCALE and LOSS~)

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

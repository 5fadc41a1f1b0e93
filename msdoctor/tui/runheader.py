"""The run header: model, world size, progress, elapsed, throughput, ETA, alert count."""
from __future__ import annotations

import time
from typing import Optional

from rich.text import Text
from textual.widgets import Static

from msdoctor.core import format as fmt
from msdoctor.tui.model import RunSummary


def header_text(run: Optional[RunSummary], source: str, stale: bool = False) -> Text:
    """Two lines: what and how far; then speed, time and alerts."""
    if run is None:
        return Text.assemble(("msdoctor", "bold"), f"  {source}", ("  waiting for data…", "dim"))
    world = run.world_size if run.world_size is not None else "?"
    step = "-" if run.step is None else str(run.step)
    if run.total_steps:
        pct = "" if run.step is None else f" ({100.0 * run.step / run.total_steps:.0f}%)"
        step += f"/{run.total_steps}{pct}"
    first = Text.assemble(
        ("run ", "dim"), (run.run, "bold"),
        ("  model ", "dim"), run.model or "?",
        *((("  ", ""), (run.precision, "")) if run.precision else ()),
        ("  ranks ", "dim"), f"{run.ranks}/{world}",
        ("  step ", "dim"), (step, "bold"), *_ended(run))
    elapsed = ("~" if run.elapsed_estimated else "") + fmt.duration(run.elapsed_s)
    second = Text.assemble(
        ("elapsed ", "dim"), elapsed,
        ("  tok/s ", "dim"), (fmt.rate(run.tokens_per_s), "bold"),
        ("  ETA ", "dim"), fmt.duration(run.eta_s) if run.eta_s is not None else "-",
        *((("  goodput ", "dim"), (f"{100.0 * run.goodput:.0f}%", "bold"))
          if run.goodput is not None else ()),
        ("  ", ""),
        (f"{run.firing} firing", "bold white on red" if run.firing else "green"),
        *(((" ", ""), (f"{run.pending} pending", "yellow")) if run.pending else ()),
        *((("  worst ", "dim"), (f"rank {run.worst_rank}", "bold"), ("(w)", "dim"))
          if run.worst_rank is not None else ()),
        *((("  ", ""), ("stale", "bold magenta")) if stale else ()))
    return Text("\n").join([first, second])


def _ended(run: RunSummary) -> tuple:
    """``  ended ok 14:02:11`` once every rank has ended (red when it failed)."""
    if not run.ended:
        return ()
    outcome = str(run.ended.get("outcome", "?"))
    t = run.ended.get("t")
    when = time.strftime("%H:%M:%S", time.localtime(float(t))) \
        if isinstance(t, (int, float)) else ""
    return (("  ended ", "dim"), (f"{outcome} {when}".strip(),
                                  "bold green" if outcome == "ok" else "bold red"))


class RunHeader(Static):
    """Shows :func:`header_text` for the latest snapshot."""

    DEFAULT_CSS = """
    RunHeader { height: 2; padding: 0 1; background: $panel; }
    """

    _shown: Optional[Text] = None

    def show(self, run: Optional[RunSummary], source: str, stale: bool = False) -> None:
        """Show the header of ``run``; its height is fixed, so a new text needs no layout."""
        text = header_text(run, source, stale)
        if text != self._shown:
            self._shown = text
            self.update(text, layout=False)

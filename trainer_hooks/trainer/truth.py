"""The trainer's own account of where its time went (``--truth FILE``), for the goodput tests.

Measured by the trainer's own clocks, not by msdoctor's hooks, and written beside the run
(never into the spool): one JSON line per record, appended and flushed at once, so a crash
loses none.

- ``begin``/``end``: a step's begin (the first callback of ``on_train_step_begin``: the data
  has arrived) and end (the last callback of ``on_train_step_end``), ``t`` wall-clock seconds;
- ``save``, ``load``, ``eval``, ``hang``: ``s`` seconds, as the saver, the loader, the
  evaluator and the hang injection timed themselves;
- ``crash``: the ``crash@STEP`` injection raising, at ``t``.

Every record carries ``pid`` (a restart is a new process).
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Optional


class Truth:
    """Appends records to ``path`` (None: records nothing)."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path

    def __bool__(self) -> bool:
        return self.path is not None

    def note(self, kind: str, **fields: Any) -> None:
        if self.path is None:
            return
        record = {"kind": kind, "t": time.time(), "pid": os.getpid(), **fields}
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


def make_callbacks(truth: Truth):
    """``(first, last)``: put ``first`` at the head of the callback list, ``last`` at its tail."""
    from mindspore.train import Callback

    class StepBegins(Callback):
        def on_train_step_begin(self, run_context) -> None:
            truth.note("begin", step=int(run_context.original_args().cur_step_num))

    class StepEnds(Callback):
        def on_train_step_end(self, run_context) -> None:
            truth.note("end", step=int(run_context.original_args().cur_step_num))

    return StepBegins(), StepEnds()


NOTHING = Truth(None)

__all__ = ["Truth", "NOTHING", "make_callbacks"]

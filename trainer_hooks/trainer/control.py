"""The bundled trainer's side of the sidecar's rule actions: ``<run_dir>/control/*.json``.

- ``skip.json``: data batches to skip, from the next batch the loader reads and on resume;
- ``lr.json``: a factor on the learning rate (deleting the file brings it back to 1); it stays
  in force over a rollback and a ``--resume`` (checkpoints do not carry it);
- ``rollback.json``: stop after this step, load the checkpoint it names, skip the batches from
  the one after that checkpoint to the one read last plus ``margin``, and go on (renamed to
  ``rollback.done.json`` once done, so it is done once);
- ``protect.json``: checkpoints the rotation (``--keep``) never deletes.

One ``os.stat`` of ``control/`` per step; the files are read again only when it changed. A file
that cannot be parsed is reported once (a warning naming the file and what was expected) and
ignored: training goes on. Every action applied is printed and, with the hooks on, recorded as
an ``action`` event in the spool.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from trainer_hooks.guard import Guard
from trainer_hooks.wire import (
    LR_FILE,
    PROTECT_FILE,
    ROLLBACK_DONE_FILE,
    ROLLBACK_FILE,
    SKIP_FILE,
    NotRegularFile,
    read_regular,
)


class DataMap:
    """Which data batch each step reads: the ``s``-th batch not skipped (1-based)."""

    def __init__(self) -> None:
        self.skipped: List[Tuple[int, int]] = []        # merged [first, last] batch ranges

    def skip(self, first: int, last: int) -> None:
        spans = sorted(self.skipped + [(first, last)])
        merged: List[Tuple[int, int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.skipped = merged

    def batch(self, step: int) -> int:
        """The data batch step ``step`` reads."""
        d = step
        for a, b in self.skipped:
            if a <= d:
                d += b - a + 1
            else:
                break
        return d


@dataclass
class Rollback:
    """A rollback request as the trainer carries it out."""

    to_step: int
    checkpoint: str
    skip_from: int
    margin: int
    reason: str
    alert: str


def _number(doc: Dict[str, Any], key: str, low: float) -> Optional[float]:
    value = doc.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= low:
        return float(value)
    return None


class Control:
    """Reads the control directory; holds what the trainer should do now."""

    def __init__(self, run_dir: str, run: str, data: DataMap,
                 record: Callable[[str, str, Optional[str], Optional[int]], None]) -> None:
        self.run_dir, self.run, self.data, self.record = run_dir, run, data, record
        self.guard = Guard("msdoctor train control")
        self.lr_factor = 1.0
        self.protected: set = set()
        self.rollback: Optional[Rollback] = None
        self._seen: Dict[str, Any] = {}       # file -> (mtime_ns, inode) last read
        self._dir_stamp: Any = None
        self._skip_count = 0                 # ranges of skip.json applied so far

    def path(self, name: str) -> str:
        return os.path.join(self.run_dir, name)

    def poll(self, step: int) -> None:
        """Re-read the files when ``control/`` changed (one stat otherwise)."""
        try:
            info = os.stat(os.path.dirname(self.path(SKIP_FILE)))
            stamp = (info.st_mtime_ns, info.st_ino)
        except OSError:
            stamp = None
        if stamp == self._dir_stamp:
            return
        self._dir_stamp = stamp
        for name, apply in ((LR_FILE, self._lr), (SKIP_FILE, self._skip),
                            (PROTECT_FILE, self._protect), (ROLLBACK_FILE, self._rollback)):
            doc = self._read(name)
            if doc is not None:
                apply(doc, step)
            elif name == LR_FILE and self.lr_factor != 1.0 and not os.path.exists(self.path(name)):
                self.lr_factor = 1.0
                self.record("lower_lr", f"{LR_FILE} removed: learning-rate factor back to 1",
                            None, step)

    def _read(self, name: str) -> Optional[Dict[str, Any]]:
        """The file's object when it is new, addressed to this run and well formed; else None."""
        path = self.path(name)
        try:
            info = os.stat(path)
        except OSError:
            self._seen.pop(name, None)
            return None
        stamp = (info.st_mtime_ns, info.st_ino)
        if self._seen.get(name) == stamp:
            return None
        self._seen[name] = stamp
        try:
            doc = json.loads(read_regular(path, 1 << 20))
        except NotRegularFile:
            self.guard.report(name + ":kind", f"ignoring {path}: not a regular file")
            return None
        except (OSError, ValueError) as exc:
            self.guard.report(name + ":bad", f"ignoring {path}: {exc}; expected a JSON object "
                                             "written by msdoctor serve")
            return None
        if not isinstance(doc, dict):
            self.guard.report(name + ":bad", f"ignoring {path}: holds {type(doc).__name__}, "
                                             "expected a JSON object")
            return None
        if isinstance(doc.get("run"), str) and doc["run"] != self.run:
            self.guard.report(name + ":run", f"ignoring {path}: it is for run {doc['run']!r}, "
                                             f"this is run {self.run!r}")
            return None
        return doc

    def _lr(self, doc: Dict[str, Any], step: int) -> None:
        factor = _number(doc, "factor", 0.0)
        if factor is None or not 0 < factor <= 1:
            self.guard.report("lr:factor", f"ignoring {self.path(LR_FILE)}: expected \"factor\" "
                                           f"in (0, 1], got {doc.get('factor')!r}")
            return
        self.lr_factor = factor
        self.record("lower_lr", f"learning rate x{factor:g}: {doc.get('reason', '')}",
                    doc.get("alert") if isinstance(doc.get("alert"), str) else None, step)

    def _skip(self, doc: Dict[str, Any], step: int) -> None:
        ranges = doc.get("ranges")
        if not isinstance(ranges, list):
            self.guard.report("skip:ranges", f"ignoring {self.path(SKIP_FILE)}: expected "
                                             "\"ranges\": [{\"from_step\", \"to_step\"}, ...]")
            return
        for item in ranges[self._skip_count:]:
            first = _number(item, "from_step", 1) if isinstance(item, dict) else None
            last = _number(item, "to_step", 1) if isinstance(item, dict) else None
            if first is None or last is None or last < first:
                self.guard.report("skip:range", f"ignoring a range of {self.path(SKIP_FILE)}: "
                                                f"expected from_step <= to_step, got {item!r}")
                continue
            a, b = self.data.batch(int(first)), self.data.batch(int(last))
            self.data.skip(a, b)
            self.record("skip_batches", f"skipping data batches {a}..{b} (steps {int(first)}.."
                        f"{int(last)}): {item.get('reason') or ''}", item.get("alert"), step)
        self._skip_count = len(ranges)

    def _protect(self, doc: Dict[str, Any], step: int) -> None:
        paths = doc.get("paths")
        if isinstance(paths, list):
            new = {os.path.realpath(p) for p in paths if isinstance(p, str)} - self.protected
            self.protected |= new
            for path in sorted(new):
                self.record("protect_checkpoint", f"keeping {path} from rotation",
                            doc.get("alert"), step)

    def _rollback(self, doc: Dict[str, Any], step: int) -> None:
        to_step, path = _number(doc, "to_step", 0), doc.get("checkpoint")
        if to_step is None or not isinstance(path, str) or not os.path.isfile(path):
            self.guard.report("rollback:bad", f"ignoring {self.path(ROLLBACK_FILE)}: expected "
                                              "\"to_step\" and \"checkpoint\", an existing file; "
                                              f"got {doc.get('to_step')!r}, {path!r}")
            return
        self.rollback = Rollback(int(to_step), path, int(_number(doc, "skip_from", 1) or to_step + 1),
                                 int(_number(doc, "margin", 0) or 0), str(doc.get("reason") or ""),
                                 str(doc.get("alert") or ""))

    def done_rollback(self, stopped_at: int) -> Tuple[int, int]:
        """After the rollback's checkpoint is loaded: skip its batches, mark the file done;
        returns the data batches skipped."""
        rb = self.rollback
        assert rb is not None
        a = self.data.batch(rb.skip_from)
        b = self.data.batch(max(stopped_at, rb.skip_from)) + rb.margin
        self.data.skip(a, b)
        try:
            os.replace(self.path(ROLLBACK_FILE), self.path(ROLLBACK_DONE_FILE))
        except OSError as exc:
            self.guard.report("rollback:rename", f"could not mark {self.path(ROLLBACK_FILE)} "
                                                 f"done: {exc}")
        self.record("rollback", f"rolled back from step {stopped_at} to step {rb.to_step} "
                    f"({rb.checkpoint}), skipping data batches {a}..{b}: {rb.reason}",
                    rb.alert or None, rb.to_step)
        self.rollback = None
        return a, b


def make_callback(control: Control, schedule):
    """The callback polling ``control`` each step: LR factor, rollback stop."""
    from mindspore import Tensor
    from mindspore.train import Callback

    class ControlCallback(Callback):
        """Applies the control files between steps (see module docstring)."""

        def __init__(self) -> None:
            super().__init__()
            self.factor = 1.0
            self.stopped_at: Optional[int] = None

        def on_train_begin(self, run_context) -> None:
            try:                    # on --resume: the factor lr.json holds, from the first step
                self._apply_lr()
            except Exception as exc:  # noqa: BLE001 - never raise into training
                control.guard.report("callback", f"control failed: {type(exc).__name__}: {exc}")

        def _apply_lr(self) -> None:
            if control.lr_factor != self.factor:
                base = float(schedule.scale.asnumpy()) / self.factor
                self.factor = control.lr_factor
                schedule.scale.set_data(Tensor(base * self.factor, schedule.scale.dtype))

        def on_train_step_end(self, run_context) -> None:
            step = int(run_context.original_args().cur_step_num)
            try:
                control.poll(step)
                self._apply_lr()
                if control.rollback is not None and self.stopped_at is None:
                    self.stopped_at = step
                    run_context.request_stop()
            except Exception as exc:  # noqa: BLE001 - never raise into training
                control.guard.report("callback", f"control failed: {type(exc).__name__}: {exc}")

    return ControlCallback()


def skipped_batches(data: DataMap) -> int:
    return sum(b - a + 1 for a, b in data.skipped)


__all__ = ["Control", "DataMap", "Rollback", "make_callback", "skipped_batches"]

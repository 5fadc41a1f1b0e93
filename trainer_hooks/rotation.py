"""Keeping the checkpoints ``control/protect.json`` names out of the savers' own rotation.

MindSpore's ``ModelCheckpoint`` and MindFormers' ``CheckpointMonitor`` (its default, legacy
format) delete the oldest file beyond ``keep_checkpoint_max``: before each save their
``CheckpointManager`` lists the directory (``update_ckpoint_filelist``) and removes the oldest
file of that list. :func:`hold` wraps that listing on the saver's own manager so a protected
file is never in it: it is never deleted and does not count towards ``keep_checkpoint_max``.
MindFormers' new format (``use_legacy_format: False``) deletes the oldest directory of its
``current_ckpt_step_list``; :func:`hold` replaces that list with a :class:`ProtectedList`, which
drops a protected directory (one that is, or holds, a protected path) from the list, so the
rotation never reaches it.

Protected paths are compared as real paths, relative ones resolved in the trainer's working
directory. ``protect.json`` is read again only when it changed (one ``os.stat`` per save); a
file that cannot be parsed is reported once and protects nothing.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, FrozenSet, Iterable, Optional, Tuple

from trainer_hooks.guard import Guard
from trainer_hooks.wire import PROTECT_FILE, NotRegularFile, read_regular


class Protected:
    """The real paths ``<run_dir>/control/protect.json`` names, re-read when it changes."""

    def __init__(self, run_dir: str, guard: Guard) -> None:
        self.path = os.path.join(run_dir, PROTECT_FILE)
        self.guard = guard
        self._stamp: Optional[Tuple[int, int]] = None
        self._paths: FrozenSet[str] = frozenset()

    def paths(self) -> FrozenSet[str]:
        try:
            info = os.stat(self.path)
        except OSError:
            self._stamp, self._paths = None, frozenset()
            return self._paths
        stamp = (info.st_mtime_ns, info.st_ino)
        if stamp != self._stamp:
            self._stamp, self._paths = stamp, self._read()
        return self._paths

    def _read(self) -> FrozenSet[str]:
        try:
            doc = json.loads(read_regular(self.path, 1 << 20))
        except (NotRegularFile, OSError, ValueError) as exc:
            self.guard.report("protect:bad", f"ignoring {self.path}: {exc}; expected a JSON "
                                             "object {\"paths\": [...]} written by msdoctor serve")
            return frozenset()
        paths = doc.get("paths") if isinstance(doc, dict) else None
        if not isinstance(paths, list):
            self.guard.report("protect:bad", f"ignoring {self.path}: expected "
                                             "{\"paths\": [checkpoint paths]}")
            return frozenset()
        return frozenset(os.path.realpath(p) for p in paths if isinstance(p, str))

    def __call__(self, path: str) -> bool:
        """True when ``path`` is protected, or is a directory holding a protected path."""
        paths = self.paths()
        if not paths:
            return False
        real = os.path.realpath(path)
        return real in paths or any(p.startswith(real + os.sep) for p in paths)


class ProtectedList(list):
    """A saver's list of checkpoint directories from which protected ones drop out as the
    saver appends a new one (so its rotation, which deletes the list's first entry beyond the
    maximum, never deletes them)."""

    def __init__(self, items: Iterable[Any], protected: Callable[[str], bool]) -> None:
        super().__init__(items)
        self.protected = protected

    def append(self, item: Any) -> None:
        try:
            self[:] = [d for d in self if not (isinstance(d, str) and self.protected(d))]
        except Exception:  # noqa: BLE001 - never raise into the saver
            pass
        super().append(item)


def hold(saver: Any, run_dir: str, guard: Guard) -> bool:
    """Make ``saver``'s rotation spare the files ``protect.json`` names; True when it has a
    rotation this knows (see the module docstring). Never raises."""
    try:
        protected = Protected(run_dir, guard)
        held = False
        manager = getattr(saver, "_manager", None)
        listing = getattr(manager, "update_ckpoint_filelist", None)
        if callable(listing) and not getattr(listing, "msdoctor_held", False):

            def filtered(directory: str, prefix: str) -> None:
                listing(directory, prefix)
                try:
                    files = manager._ckpoint_filelist
                    manager._ckpoint_filelist = [f for f in files if not protected(f)]
                except Exception as exc:  # noqa: BLE001
                    guard.report("protect:list", f"protect.json not applied: {exc}")

            filtered.msdoctor_held = True       # type: ignore[attr-defined]
            manager.update_ckpoint_filelist = filtered
            held = True
        steps = getattr(saver, "current_ckpt_step_list", None)
        if isinstance(steps, list) and not isinstance(steps, ProtectedList):
            saver.current_ckpt_step_list = ProtectedList(steps, protected)
            held = True
        return held
    except Exception as exc:  # noqa: BLE001 - never raise into training
        guard.report("protect:hold", f"cannot keep protect.json's checkpoints from rotation: {exc}")
        return False


__all__ = ["Protected", "ProtectedList", "hold"]

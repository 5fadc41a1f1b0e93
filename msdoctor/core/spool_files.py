"""The spool's file-level side: listing ``events/``, what may stand there, problems reported once.

Anything can stand at ``events/rank-<N>.jsonl``: a directory, a FIFO, a device, a symbolic
link loop, a file the process has no descriptor left to open. Each is a problem of that
path, reported once (again only when it changes) while the other files are read on. Only
the canonical name of a rank, ``rank-<N>`` without leading zeros, is a spool file:
``rank-00.jsonl`` beside ``rank-0.jsonl`` would merge two files into one rank, so it is
reported and not read.
"""
from __future__ import annotations

import logging
import os
from typing import Dict, List, Optional, Tuple

from msdoctor.wire.layout import RANK_FILE

log = logging.getLogger("msdoctor.spool")


def rank_of(name: str) -> Optional[int]:
    """The rank of a file name that looks like a spool file (``rank-<digits>.jsonl``)."""
    match = RANK_FILE.match(name)
    return int(match.group(1)) if match else None


def non_canonical(name: str, rank: int) -> Optional[str]:
    """Why ``name`` is not read as the spool of ``rank``; None for ``rank-<rank>.jsonl``."""
    canonical = f"rank-{rank}.jsonl"
    if name == canonical:
        return None
    return (f"not read: the spool of rank {rank} is named {canonical} (no leading zeros); a "
            f"second name for one rank would merge two files into one")


class Listing:
    """``events/`` as it is now; a listing that fails is logged once per kind of failure."""

    def __init__(self, events_dir: os.PathLike | str,
                 part: Optional[Tuple[int, int]] = None) -> None:
        self.events_dir = os.fspath(events_dir)
        self.part = part                    # (i, n): only the ranks r with r % n == i
        self._failed: Optional[str] = None

    def entries(self) -> Optional[List[Tuple[int, os.DirEntry]]]:
        """``(rank, entry)`` of every name that looks like a spool file, by rank; ``[]``
        when ``events/`` is absent; None when it cannot be listed now (positions are kept)."""
        try:
            with os.scandir(self.events_dir) as it:
                found = [(rank, e) for e in it if (rank := rank_of(e.name)) is not None]
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            message = f"cannot list {self.events_dir}: {exc.strerror or exc}"
            if message != self._failed:
                self._failed = message
                log.error("%s; retrying at the next poll, positions kept", message)
            return None
        self._failed = None
        if self.part is not None:
            index, count = self.part
            found = [item for item in found if item[0] % count == index]
        found.sort(key=lambda item: (item[0], item[1].name))
        return found

    def moved(self, inode: Optional[int], path: str) -> Optional[str]:
        """Another name in ``events/`` (not a spool name) for the file ``inode``: where a
        rotated spool file went (``rank-0.jsonl.1``), or None."""
        if inode is None:
            return None
        try:
            with os.scandir(self.events_dir) as it:
                for entry in it:
                    try:
                        if (entry.inode() == inode and entry.path != path
                                and rank_of(entry.name) is None
                                and entry.is_file(follow_symlinks=False)):
                            return entry.path
                    except OSError:
                        continue
        except OSError:
            return None
        return None


class Problems:
    """The current problem of each path: a new or changed one is reported, a repeat is not."""

    def __init__(self) -> None:
        self._current: Dict[str, Tuple[str, str]] = {}

    def report(self, path: str, stage: str, message: str) -> bool:
        """Note ``message`` for ``path`` (found at ``stage``); True when it is news."""
        if self._current.get(path) == (stage, message):
            return False
        self._current[path] = (stage, message)
        return True

    def clear(self, path: str, *stages: str) -> None:
        """``path`` is fine again at these stages: its next problem is news."""
        current = self._current.get(path)
        if current is not None and current[0] in stages:
            del self._current[path]

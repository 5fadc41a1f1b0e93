"""Real text that is on every machine with Python: the standard library's own sources.

No downloads: the corpus is the ``.py`` files (code, comments, docstrings) of the interpreter's
standard library, read in a fixed order so every machine with the same Python builds the same
corpus, and capped in size so building it takes seconds.
"""
from __future__ import annotations

import hashlib
import os
import sysconfig
from pathlib import Path
from typing import Iterator, List

#: Default cap on the corpus size: a few MB is plenty for the tiny/small presets.
DEFAULT_MAX_BYTES = 6 * 1024 * 1024

_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__", "idlelib", "lib2to3", "turtledemo"}


def stdlib_dir() -> Path:
    """The directory of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def source_files(root: Path) -> List[Path]:
    """Every ``.py`` file under ``root`` in a stable (sorted) order, without third-party packages."""
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS)
        found.extend(Path(directory) / name for name in sorted(files) if name.endswith(".py"))
    return found


def documents(root: Path = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[str]:
    """The corpus as one document per source file, stopping once ``max_bytes`` were read."""
    total = 0
    for path in source_files(root or stdlib_dir()):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not text.strip():
            continue
        yield text
        total += len(text)
        if total >= max_bytes:
            return


def fingerprint(root: Path = None, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """A short key naming this corpus (root, file list, sizes and the cap): cache entries use it."""
    root = root or stdlib_dir()
    digest = hashlib.sha256(f"{root}|{max_bytes}".encode())
    for path in source_files(root):
        try:
            digest.update(f"{path.relative_to(root)}:{path.stat().st_size};".encode())
        except OSError:
            continue
    return digest.hexdigest()[:12]

"""Open the files of a run directory without trusting what sits at their path.

A run directory is untrusted: a FIFO, a device (``/dev/zero``), a directory or a symbolic
link loop can stand where a regular file is expected. :func:`open_regular` opens with
``O_NONBLOCK`` (opening a FIFO never waits for a writer) and refuses anything but a regular
file, so a reader can neither hang nor read without end. Standard library only: the training
hooks import it.
"""
from __future__ import annotations

import errno
import os
import stat
from typing import Optional, Union

from msdoctor.wire.errors import MsdoctorError

PathLike = Union[str, "os.PathLike[str]"]
#: Files and directories msdoctor creates in a run directory: nobody else may write them.
FILE_MODE = 0o644
DIR_MODE = 0o755


class NotRegularFile(MsdoctorError, OSError):
    """Something other than a regular file stands where one is expected."""


def kind_of(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``"a directory"``, ``"a FIFO"``, ..."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: PathLike, mode: int, what: str = "a regular file") -> NotRegularFile:
    """The error for ``path`` being of ``mode`` where ``what`` was expected."""
    return NotRegularFile(errno.EINVAL, f"{os.fspath(path)} is {kind_of(mode)}; expected {what}")


def open_regular(path: PathLike, flags: int = os.O_RDONLY, mode: int = 0o644,
                 what: str = "a regular file") -> int:
    """A descriptor of ``path`` opened with ``flags``, never blocking on a FIFO.

    Raises :class:`NotRegularFile` when ``path`` is not a regular file (after following
    symbolic links), and :class:`OSError` as ``os.open`` does (a symbolic link loop is
    ``ELOOP``, a FIFO opened for writing without a reader ``ENXIO``).
    """
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise not_regular(path, info.st_mode, what)
    return fd


def problem_with(path: PathLike, what: str = "a regular file") -> Optional[str]:
    """Why ``path`` cannot serve as ``what``; None when it is one or does not exist."""
    try:
        info = os.stat(path)
    except FileNotFoundError:           # absent, or a dangling symbolic link
        return None
    except OSError as exc:
        return f"{os.fspath(path)}: {exc.strerror or exc}; expected {what}"
    if stat.S_ISREG(info.st_mode):
        return None
    return str(not_regular(path, info.st_mode, what).strerror)


def read_regular(path: PathLike, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of the regular file ``path``."""
    fd = open_regular(path)
    try:
        chunks, left = [], int(limit)
        while left > 0:
            data = os.read(fd, min(left, 1 << 20))
            if not data:
                break
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks)
    finally:
        os.close(fd)


def make_dir(path: PathLike) -> None:
    """Create the directory ``path`` (and its parents) as ``DIR_MODE`` whatever the umask;
    an existing directory is left as it is."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        return
    os.chmod(path, DIR_MODE)


def describe(path: PathLike, exc: OSError) -> str:
    """``exc`` about ``path`` in one phrase that names the path once."""
    if isinstance(exc, NotRegularFile):
        return str(exc.strerror)
    return f"{os.fspath(path)}: {exc.strerror or exc}"

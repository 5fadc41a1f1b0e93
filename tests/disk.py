"""A full disk for tests and benchmarks: a 64 KiB tmpfs filled to its last block."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Tuple, Union


def mount_full_tmpfs(base: Path) -> Tuple[Union[Path, None], str]:
    """Mount a 64 KiB tmpfs at ``base/tiny`` with an empty ``run/events`` and fill it.

    Returns ``(mount, "")``, or ``(None, why)`` where mounting is not allowed.
    """
    mount = base / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return None, done.stderr.strip()
    (mount / "run" / "events").mkdir(parents=True)
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 512):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return mount, ""


def unmount(mount: Path) -> None:
    subprocess.run(["umount", "-l", str(mount)], check=False)

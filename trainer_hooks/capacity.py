"""How much memory the job may use: what MemoryNearCapacity compares the usage with.

``run_start.config`` carries ``mem_host_total_bytes`` (the machine's RAM, or the smaller limit of
the container's cgroup, which is what the OOM killer enforces) and, on GPU/Ascend,
``mem_device_capacity_bytes`` (the device's memory, or MindSpore's ``max_device_memory`` cap
if smaller). Read once at run start; every failure reads as "unknown" (None), never raises.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator, List, Optional

from trainer_hooks import env

#: A cgroup limit at or above this means "no limit" (v1 writes 2^63 rounded down to a page).
UNLIMITED = 1 << 60
CGROUP_ROOT = Path("/sys/fs/cgroup")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.I)


def host_memory_limit(proc_cgroup: str = "/proc/self/cgroup",
                      root: Path = CGROUP_ROOT) -> Optional[int]:
    """Bytes of host memory this process may use: min(RAM, cgroup limits), None if unknown."""
    limits = _cgroup_limits(proc_cgroup, root)
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError, AttributeError):
        pass
    limits = [b for b in limits if 0 < b < UNLIMITED]
    return min(limits) if limits else None


def _cgroup_limits(proc_cgroup: str, root: Path) -> List[int]:
    """The memory limits of this process's cgroup and its ancestors (v1 and v2)."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return []
    found: List[int] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "memory" in controllers.split(","):
            files = _ancestors(root / "memory", path, "memory.limit_in_bytes")
        elif controllers == "":
            files = _ancestors(root, path, "memory.max")
        else:
            continue
        for file in files:
            value = _read_int(file)
            if value is not None:
                found.append(value)
    return found


def _ancestors(base: Path, path: str, name: str) -> Iterator[Path]:
    """``base/<path>/name`` and the same file in every parent up to ``base``; inside a
    container the cgroup path may not exist below the mount, whose root is then the limit."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    for depth in range(len(parts), -1, -1):
        file = base.joinpath(*parts[:depth], name)
        if file.is_file():
            yield file


def _read_int(file: Path) -> Optional[int]:
    try:
        text = file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None          # v2 "max": no limit


def parse_size(text: str) -> Optional[int]:
    """``"59GB"`` / ``"1024GB"`` / ``"512MB"`` (MindSpore's ``max_device_memory``) -> bytes."""
    match = _SIZE.match(str(text))
    if not match:
        return None
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)


def device_memory_capacity() -> Optional[int]:
    """Bytes of device memory on GPU/Ascend (MindSpore already imported), None on CPU/unknown."""
    target = env.device_target()
    if not target or target == "CPU":
        return None
    try:
        import mindspore as ms
        from mindspore import hal

        sizes = [int(hal.get_device_properties(int(ms.get_context("device_id") or 0)).total_memory)]
        cap = parse_size(ms.get_context("max_device_memory") or "")
        if cap:
            sizes.append(cap)
        sizes = [s for s in sizes if s > 0]
        return min(sizes) if sizes else None
    except Exception:  # noqa: BLE001 - an old MindSpore or an uninitialised device: unknown
        return None

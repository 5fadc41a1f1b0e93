"""What the hooks learn about their process: rank, world size, versions and memory.

Nothing here initialises distributed communication or imports MindSpore /
MindFormers when they are not already imported by the training script.
"""
from __future__ import annotations

import functools
import os
import platform
import sys
import time
import weakref
from typing import Dict, Mapping, Optional, Tuple

#: Environment variables that carry the rank / world size, in order of preference
#: (MindSpore msrun and rank tables, torchrun-style, Open MPI, MPICH/PMI, Slurm).
RANK_VARS = ("RANK_ID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
WORLD_VARS = ("RANK_SIZE", "WORLD_SIZE", "MS_WORKER_NUM", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
              "SLURM_NTASKS")


def _first_int(names: Tuple[str, ...], environ: Mapping[str, str]) -> Optional[int]:
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def communication_rank() -> Optional[Tuple[int, int]]:
    """(rank, world size) from ``mindspore.communication`` if ``init()`` already ran, else None.

    Checks ``GlobalComm.INITED`` (set by ``mindspore.communication.init``) without
    importing MindSpore when the script has not, and without initialising anything.
    """
    if "mindspore" not in sys.modules:
        return None
    try:
        from mindspore.communication._comm_helper import GlobalComm

        if not GlobalComm.INITED:
            return None
        from mindspore.communication import get_group_size, get_rank

        return int(get_rank()), int(get_group_size())
    except Exception:  # noqa: BLE001 - any failure means "not known from here"
        return None


def rank_and_world(environ: Mapping[str, str] = os.environ) -> Tuple[int, int]:
    """This process's (rank, world size): communication first, then environment, else (0, 1)."""
    known = communication_rank()
    if known is not None:
        return known
    rank = _first_int(RANK_VARS, environ)
    world = _first_int(WORLD_VARS, environ)
    return (rank or 0), (world or 1)


def device_target() -> Optional[str]:
    """MindSpore's ``device_target`` ("CPU", "GPU", "Ascend") when MindSpore is already imported
    and has a context; None otherwise (never imports it, never raises)."""
    ms = sys.modules.get("mindspore")
    if ms is None:
        return None
    try:
        return str(ms.get_context("device_target")) or None
    except Exception:  # noqa: BLE001 - no context yet
        return None


@functools.lru_cache(maxsize=1)
def _installed_versions() -> Tuple[Tuple[str, str], ...]:
    return tuple(_read_versions().items())


def versions() -> Dict[str, str]:
    """Installed versions of python, mindspore and mindformers (read once per process)."""
    return dict(_installed_versions())


def _read_versions() -> Dict[str, str]:
    """Installed versions of python, mindspore and mindformers (read from metadata, no import)."""
    found = {"python": platform.python_version()}
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return found
    for name in ("mindspore", "mindformers"):
        try:
            found[name] = metadata.version(name)
        except Exception:  # noqa: BLE001 - not installed, or broken metadata
            pass
    return found


def process_start_time(pid: str = "self") -> Optional[float]:
    """Wall time this process started (Linux ``/proc``), or None where it cannot be read.

    ``/proc/PID/stat`` gives the start in clock ticks since boot. The boot's wall time is
    taken as now less the time since boot (``CLOCK_BOOTTIME``, the clock those ticks count
    on), not ``/proc/stat``'s ``btime``: that is whole seconds, so every start read from it
    came up to a second early (startup counted that much longer, downtime that much shorter)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        return boot + since_boot
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class Memory:
    """Cheap per-step memory readings: host RSS always, device memory where it is reported.

    Host RSS is read from ``/proc/self/statm`` (Linux; the same number as psutil's
    ``memory_info().rss``, three times cheaper), with psutil as the fallback.

    Device memory comes from ``mindspore.runtime`` pool statistics; the CPU backend
    reports 0 there, so it is never asked, and a backend that keeps reporting 0 is
    not asked again after ``probe_steps`` readings (absent signals are omitted).
    """

    def __init__(self, probe_steps: int = 5) -> None:
        self._device_stats = None
        self._probes_left = probe_steps
        self._pid = os.getpid()
        self._statm: Optional[int] = None  # fd of /proc/self/statm: ~3 us a read, psutil ~9 us
        self._page = 0
        self._process = None
        self._closer: Optional[weakref.finalize] = None
        try:
            self._statm = os.open("/proc/self/statm", os.O_RDONLY)
            # closed by close(), when collected, or at exit before modules are torn down
            self._closer = weakref.finalize(self, _close_quietly, self._statm)
            self._page = os.sysconf("SC_PAGE_SIZE")
        except (OSError, AttributeError, ValueError):
            self._statm = None
            try:
                import psutil

                self._process = psutil.Process()
            except Exception:  # noqa: BLE001 - psutil missing or no /proc
                self._process = None

    def close(self) -> None:
        """Release the /proc file descriptor."""
        if self._closer is not None:
            self._closer()
        self._statm = None

    def enable_device(self) -> None:
        """Use device pool statistics if MindSpore runs on a backend that reports them."""
        try:
            from mindspore.runtime.memory import _memory_stats

            target = device_target()
            if target and target != "CPU":
                self._device_stats = lambda: _memory_stats(target)
        except Exception:  # noqa: BLE001 - older MindSpore: no runtime memory API
            self._device_stats = None

    def host_rss_bytes(self) -> Optional[int]:
        """Resident set size of this process, or None when unknown."""
        try:
            if self._statm is not None and os.getpid() == self._pid:
                return int(os.pread(self._statm, 128, 0).split()[1]) * self._page
            if self._process is None or os.getpid() != self._pid:
                import psutil

                self._process, self._pid = psutil.Process(), os.getpid()
                self.close()
            return self._process.memory_info().rss
        except Exception:  # noqa: BLE001
            return None

    def device(self) -> Dict[str, int]:
        """``mem_device_bytes`` / ``mem_device_peak_bytes`` when the backend reports non-zero."""
        if self._device_stats is None:
            return {}
        try:
            stats = self._device_stats()
        except Exception:  # noqa: BLE001
            self._device_stats = None
            return {}
        found = {}
        allocated, peak = stats.get("total_allocated_memory"), stats.get("max_allocated_memory")
        if allocated:
            found["mem_device_bytes"] = int(allocated)
        if peak:
            found["mem_device_peak_bytes"] = int(peak)
        if not found:
            self._probes_left -= 1
            if self._probes_left <= 0:
                self._device_stats = None
        return found

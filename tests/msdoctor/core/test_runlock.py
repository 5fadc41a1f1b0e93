"""``msdoctor.core.runlock``: one sidecar per run directory."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from msdoctor.core.runlock import RunLock, RunLocked

ROOT = Path(__file__).resolve().parents[3]


def test_a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from msdoctor.core.runlock import RunLock; "
                               "RunLock(sys.argv[1]).acquire(); print('held', flush=True); "
                               "time.sleep(600)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLocked, match=f"pid {holder.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait(timeout=30)
    lock = RunLock(tmp_path).acquire()                  # released with its holder
    assert lock.holder() == os.getpid()
    lock.release()

"""Rank, world size, versions and memory readings, without initialising anything."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from trainer_hooks import env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("environ, expected", [
    ({}, (0, 1)),
    ({"RANK_ID": "5", "RANK_SIZE": "8"}, (5, 8)),
    ({"RANK": "2", "WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "7"}, (2, 4)),
    ({"OMPI_COMM_WORLD_RANK": "7", "OMPI_COMM_WORLD_SIZE": "16"}, (7, 16)),
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4"}, (3, 4)),
    ({"RANK_ID": "", "RANK": "oops", "PMI_RANK": "1", "MS_WORKER_NUM": "2"}, (1, 2)),
], ids=["nothing", "msrun", "torchrun", "openmpi", "slurm", "blank-and-junk-skipped"])
def test_rank_and_world_size_come_from_the_first_launcher_variable_that_is_set(environ, expected):
    assert env.rank_and_world(environ) == expected


def test_uninitialised_mindspore_communication_is_not_consulted_or_initialised():
    pytest.importorskip("mindspore")
    from mindspore.communication._comm_helper import GlobalComm

    assert env.communication_rank() is None
    assert GlobalComm.INITED is False


def test_versions_are_read_from_package_metadata():
    found = env.versions()
    assert found["python"].count(".") == 2
    assert found["mindspore"] == "2.9.0" and found["mindformers"] == "1.9.0"


def test_host_rss_matches_psutil_and_cpu_device_memory_is_omitted():
    pytest.importorskip("mindspore")
    memory = env.Memory()
    memory.enable_device()
    ours, theirs = memory.host_rss_bytes(), psutil.Process().memory_info().rss
    assert ours == pytest.approx(theirs, rel=0.05)
    assert memory.device() == {}  # the CPU backend reports 0: never faked
    memory.close()
    assert memory.host_rss_bytes() == pytest.approx(psutil.Process().memory_info().rss, rel=0.05)


def test_a_process_start_time_falls_between_its_launch_and_its_first_line():
    """Not up to a second early, as whole-second ``btime`` made it."""
    code = ("import time; now = time.time(); from trainer_hooks.env import process_start_time; "
            "print(process_start_time(), now)")
    launched = time.time()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    started, first_line = map(float, done.stdout.split())
    assert launched - 0.03 <= started <= first_line     # the clock ticks are 10 ms

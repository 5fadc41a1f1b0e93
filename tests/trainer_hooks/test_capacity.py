"""The memory a job may use, as run_start declares it: RAM, or a smaller cgroup limit."""
from __future__ import annotations

from pathlib import Path

from trainer_hooks.capacity import UNLIMITED, host_memory_limit, parse_size

GIB = 1 << 30


def cgroup_file(tmp_path: Path, lines: str) -> str:
    path = tmp_path / "proc-cgroup"
    path.write_text(lines)
    return str(path)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_cgroup_v1_limit_smaller_than_the_ram_is_the_host_total(tmp_path):
    write(tmp_path / "memory" / "job" / "memory.limit_in_bytes", f"{2 * GIB}\n")
    write(tmp_path / "memory" / "memory.limit_in_bytes", f"{UNLIMITED + 1}\n")
    proc = cgroup_file(tmp_path, "4:memory:/job\n1:cpu:/\n")
    assert host_memory_limit(proc, tmp_path) == 2 * GIB


def test_the_tightest_limit_of_the_cgroup_and_its_parents_counts(tmp_path):
    write(tmp_path / "a" / "memory.max", f"{3 * GIB}\n")
    write(tmp_path / "a" / "b" / "memory.max", "max\n")
    proc = cgroup_file(tmp_path, "0::/a/b\n")
    assert host_memory_limit(proc, tmp_path) == 3 * GIB


def test_a_container_whose_cgroup_path_is_not_below_the_mount_reads_the_mount_root(tmp_path):
    write(tmp_path / "memory" / "memory.limit_in_bytes", f"{GIB}\n")
    proc = cgroup_file(tmp_path, "4:memory:/process_api/0706179295\n")
    assert host_memory_limit(proc, tmp_path) == GIB


def test_without_any_cgroup_limit_the_host_total_is_the_physical_memory(tmp_path):
    write(tmp_path / "memory.max", "max\n")
    ram = host_memory_limit(cgroup_file(tmp_path, "0::/\n"), tmp_path)
    assert ram is not None and ram > 256 * 1024 * 1024
    assert host_memory_limit(str(tmp_path / "missing"), tmp_path) == ram


def test_max_device_memory_sizes_parse_as_mindspore_writes_them():
    assert parse_size("1024GB") == 1024 * GIB and parse_size("59GB") == 59 * GIB
    assert parse_size("512MB") == 512 << 20 and parse_size("1.5GB") == int(1.5 * GIB)
    assert parse_size("lots") is None

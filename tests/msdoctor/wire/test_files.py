"""``msdoctor.wire.files``: opening a run directory's files without trusting their path."""
from __future__ import annotations

import os
import stat

import pytest

from msdoctor.wire.files import NotRegularFile, make_dir, open_regular, problem_with, read_regular


def test_only_a_regular_file_is_opened_and_a_fifo_never_waits_for_a_writer(tmp_path):
    (tmp_path / "file").write_bytes(b"abc")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "zero").symlink_to("/dev/zero")
    assert read_regular(tmp_path / "file", 2) == b"ab"
    for name, kind in (("fifo", "a FIFO"), ("dir", "a directory"), ("zero", "a character device")):
        with pytest.raises(NotRegularFile, match=f"{name} is {kind}; expected a regular file"):
            open_regular(tmp_path / name)
        assert f"is {kind}" in problem_with(tmp_path / name)
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        open_regular(tmp_path / "loop")
    assert problem_with(tmp_path / "file") is None and problem_with(tmp_path / "absent") is None


def test_a_directory_made_under_umask_000_is_not_group_or_world_writable(tmp_path):
    old = os.umask(0)
    try:
        make_dir(tmp_path / "a" / "control")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "control").st_mode) == 0o755

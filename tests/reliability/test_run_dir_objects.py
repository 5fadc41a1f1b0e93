"""What ``msdoctor serve`` does with the run directory's own files when something hostile
stands there: a second sidecar (the lock), ``alerts.jsonl`` or ``.msdoctor/snapshot.npz`` as
/dev/zero, a FIFO, a directory or a link loop, and a umask of 000. All through the real
``msdoctor serve``; a refused start changes nothing in the run directory."""
from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from tests.reliability.helpers import Serve, serve_once, tree, wait_for, write_events

pytestmark = pytest.mark.slow
TORN = b'{"alert": "LossNonFinite", "state": "firing", "run": "r"}\n{"alert": "Loss'


def spool(run_dir: Path, *steps: int, nan_at: int = -1) -> None:
    write_events(run_dir / "events" / "rank-0.jsonl",
                 *([{"v": 1, "type": "run_start", "rank": 0, "run": "r", "t": 1.0}]
                   if 1 in steps else []),
                 *[{"v": 1, "type": "step", "rank": 0, "run": "r", "step": n, "t": 1.0 + n,
                    "loss": float("nan") if n == nan_at else 1.0 + 0.01 * n} for n in steps])


def last_step(serve: Serve) -> object:
    try:
        return serve.get("/api/v1/runs/r/ranks/0").get("last_step")
    except OSError:
        return None


def test_a_second_sidecar_is_refused_naming_the_first_ones_pid_and_changes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    spool(run_dir, 1, 2, 3)
    first = Serve(run_dir, tmp_path / "first.log", "--snapshot-every", "3600")
    try:
        assert wait_for(lambda: last_step(first) == 3, timeout=120), first.text()
        (run_dir / "alerts.jsonl").write_bytes(TORN)       # a torn tail the second must not cut
        before = tree(run_dir)
        second = serve_once(run_dir, "--listen", "127.0.0.1:0")
        assert second.returncode == 2
        assert f"(pid {first.process.pid}," in second.stderr, second.stderr
        assert "already watched by another msdoctor serve" in second.stderr
        assert tree(run_dir) == before
        assert first.process.poll() is None and last_step(first) == 3
    finally:
        first.kill9()                                      # the lock dies with its holder
    third = Serve(run_dir, tmp_path / "third.log")
    try:
        assert wait_for(lambda: last_step(third) == 3, timeout=120), third.text()
    finally:
        assert third.stop() == 0
    assert (run_dir / "alerts.jsonl").read_bytes() == TORN.rsplit(b"\n", 1)[0] + b"\n"


@pytest.mark.parametrize("why,args", [
    ("a remote address without --allow-remote", ["--listen", "0.0.0.0:0"]),
    ("a port in use", ["--listen", "127.0.0.1:{busy}"]),
])
def test_a_refused_start_leaves_the_journal_as_it_was(tmp_path, why, args):
    run_dir = tmp_path / "run"
    spool(run_dir, 1, 2)
    (run_dir / "alerts.jsonl").write_bytes(TORN)
    before = tree(run_dir)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        done = serve_once(run_dir, *[a.format(busy=busy.getsockname()[1]) for a in args])
    assert done.returncode == 2, done.stderr
    assert (run_dir / "alerts.jsonl").read_bytes() == TORN
    after = tree(run_dir)
    if why.startswith("a remote"):                        # refused before the lock is taken
        assert after == before
    else:                                                  # only the lock file is new
        assert {k: v for k, v in after.items() if not k.startswith(".msdoctor")} == before


def plant(path: Path, kind: str) -> str:
    """Put ``kind`` at ``path``; return the words serve should use for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "/dev/zero":
        path.symlink_to("/dev/zero")
        return "is a character device"
    if kind == "FIFO":
        os.mkfifo(path)
        return "is a FIFO"
    if kind == "directory":
        path.mkdir()
        return "is a directory"
    path.symlink_to(path.name)                             # a link to itself
    return "Too many levels of symbolic links"


KINDS = ["/dev/zero", "FIFO", "directory", "link loop"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_alert_journal_that_is_not_a_file_is_refused_at_start_with_a_clear_error(tmp_path,
                                                                                    kind):
    run_dir = tmp_path / "run"
    spool(run_dir, 1, 2)
    words = plant(run_dir / "alerts.jsonl", kind)
    done = serve_once(run_dir, "--listen", "127.0.0.1:0", timeout=120)   # never hangs
    assert done.returncode == 2
    assert f"{run_dir / 'alerts.jsonl'}" in done.stderr and words in done.stderr, done.stderr
    assert "expected a regular file (the alert journal" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (run_dir / ".msdoctor").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_snapshot_that_is_not_a_file_is_reported_and_serve_rebuilds_from_the_spool(tmp_path,
                                                                                    kind):
    run_dir = tmp_path / "run"
    spool(run_dir, 1, 2, 3)
    snapshot = run_dir / ".msdoctor" / "snapshot.npz"
    words = plant(snapshot, kind)
    serve = Serve(run_dir, tmp_path / "serve.log")
    try:
        assert wait_for(lambda: last_step(serve) == 3, timeout=120), serve.text()
    finally:
        code = serve.stop()
    text = serve.text()
    assert "Traceback" not in text, text
    assert f"ignoring the saved state: unreadable: {snapshot}" in text and words in text, text
    if kind == "directory":             # cannot be replaced: said once, and the exit says so
        assert text.count("msdoctor.sidecar: the state could NOT be saved") == 1, text
        assert code == 1 and "stopped; the state could NOT be saved" in text, text
    else:                                                  # replaced by a real snapshot
        assert code == 0, text
        assert stat.S_ISREG(os.lstat(snapshot).st_mode)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_under_umask_000_serve_creates_nothing_group_or_world_writable(tmp_path):
    run_dir = tmp_path / "run"
    spool(run_dir, 1, 2, 3, 4, nan_at=4)
    rules = tmp_path / "stop.yaml"
    rules.write_text("version: 1\ngroups:\n  - name: stop\n    rules:\n"
                     "      - alert: LossNonFinite\n        expr: nonfinite(loss)\n"
                     "        labels: {severity: critical}\n        action: stop_training\n"
                     "        annotations: {summary: loss is not finite}\n")
    serve = Serve(run_dir, tmp_path / "serve.log", "--no-default-rules", "--rules", str(rules),
                  preexec=lambda: os.umask(0))
    try:
        assert wait_for(lambda: (run_dir / "control" / "stop.json").exists(), timeout=120), \
            serve.text()
    finally:
        assert serve.stop() == 0
    request = json.loads((run_dir / "control" / "stop.json").read_text())
    assert request["run"] == "r" and request["alert"] == "LossNonFinite"
    modes = {name: mode(run_dir / name) for name in
             ("control", "control/stop.json", ".msdoctor", ".msdoctor/snapshot.npz",
              ".msdoctor/sidecar.lock", "alerts.jsonl")}
    assert modes == {"control": 0o755, "control/stop.json": 0o644, ".msdoctor": 0o755,
                     ".msdoctor/snapshot.npz": 0o644, ".msdoctor/sidecar.lock": 0o644,
                     "alerts.jsonl": 0o644}, {k: oct(v) for k, v in modes.items()}

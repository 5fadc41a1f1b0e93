"""Training is never hurt: a real MindSpore run (GRAPH mode, CPU) with the hooks installed
completes with no sidecar, with an unwritable spool directory and with a full disk (a real
64 KiB tmpfs); no exception reaches the loop, drops are counted, and warned about once."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from msdoctor.wire import decode

from disk import mount_full_tmpfs, unmount

STEPS = 30


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy LM, compiled once for the module (MindSpore writes into the CWD: a tmp dir)."""
    module = pytest.importorskip("trainer_hooks.toy")
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    try:
        yield module, module.build()
    finally:
        os.chdir(cwd)


def train(toy, run_dir: Path):
    module, built = toy
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        summary = module.train(str(run_dir), STEPS, toy=built)
    hook = [r for r in records if r.category.__name__ == "HookWarning"]
    doctor = summary["callback"]
    return summary, doctor, doctor.emitter, hook


def spool_events(run_dir: Path):
    files = list((run_dir / "events").glob("rank-*.jsonl"))
    return [decode(line) for f in files for line in f.read_bytes().splitlines(keepends=True)]


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 64 KiB tmpfs, filled up to its last block (skipped where mount is not allowed)."""
    mount, why = mount_full_tmpfs(tmp_path)
    if mount is None:
        pytest.skip(f"cannot mount a tmpfs here ({why}); the emitter's RLIMIT_FSIZE test covers "
                    "a full disk")
    try:
        yield mount
    finally:
        unmount(mount)


@pytest.mark.slow
def test_training_without_a_sidecar_writes_every_event_and_never_waits(toy, tmp_path):
    summary, doctor, emitter, hook = train(toy, tmp_path / "run")
    assert summary["steps"] == STEPS and hook == [] and doctor.errors == 0
    assert emitter.dropped == 0 and emitter.written == emitter.emitted
    assert [e["step"] for e in spool_events(tmp_path / "run") if e["type"] == "step"] == \
        list(range(1, STEPS + 1))


@pytest.mark.slow
def test_training_with_an_unwritable_spool_completes_drops_everything_and_warns_once(toy,
                                                                                     tmp_path):
    blocker = tmp_path / "not-a-directory"              # root ignores chmod: a file in the way
    blocker.write_text("a file where the run directory should be\n")
    summary, doctor, emitter, hook = train(toy, blocker / "run")
    assert summary["steps"] == STEPS and doctor.errors == 0
    assert emitter.written == 0 and emitter.dropped == emitter.emitted >= STEPS
    assert len(hook) == 1 and "not-a-directory" in str(hook[0].message)


@pytest.mark.slow
def test_training_on_a_full_disk_completes_keeps_only_whole_lines_and_warns_once(toy, full_tmpfs):
    run_dir = full_tmpfs / "run"
    summary, doctor, emitter, hook = train(toy, run_dir)
    assert summary["steps"] == STEPS and doctor.errors == 0
    assert emitter.dropped > 0 and emitter.written + emitter.dropped == emitter.emitted
    assert len(hook) == 1 and "No space left" in str(hook[0].message)
    assert len(spool_events(run_dir)) == emitter.written     # every line there decodes
    (full_tmpfs / "filler").unlink()                        # space again: the next run writes
    summary, doctor, emitter, hook = train(toy, run_dir)
    assert emitter.dropped == 0 and emitter.written == emitter.emitted and hook == []

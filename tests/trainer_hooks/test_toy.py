"""The toy trainer runs as a module (the demo uses it) and trains for real."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from msdoctor.wire import decode

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_toy_trainer_runs_as_a_module_and_writes_a_decodable_spool(tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "trainer_hooks.toy", "--run-dir", str(run_dir),
                           "--steps", "40", "--loss-scale", "--inject-nan-at", "30"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained 40 steps" in done.stdout
    events = [decode(line) for line in (run_dir / "events" / "rank-0.jsonl").open("rb")]
    steps = [e for e in events if e["type"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, 41))
    assert steps[-1]["loss"] < steps[0]["loss"] - 1.0
    assert [e["step"] for e in steps if e["overflow"]] == [30]


def test_bad_arguments_to_the_toy_trainer_name_the_problem():
    from trainer_hooks import toy

    with pytest.raises(ValueError, match="steps=10 must be a multiple of epochs=3"):
        toy.train(None, 10, epochs=3, hooks=False)

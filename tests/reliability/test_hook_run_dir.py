"""The training hook against a hostile run directory, with real MindSpore training: a FIFO
planted at ``control/stop.json`` never blocks it, a stop request for another run is ignored,
and a script that never calls ``on_train_end`` exits without noise."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from tests.reliability.helpers import ROOT

pytestmark = pytest.mark.slow
ms_train = pytest.importorskip("mindspore.train")


def python(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLOG_v": "3"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def spool(run_dir: Path) -> list:
    path = run_dir / "events" / "rank-0.jsonl"
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_a_fifo_planted_at_the_stop_file_never_blocks_training(tmp_path):
    done = python("""
        import os, sys
        from mindspore.train import Callback
        from trainer_hooks import toy

        run_dir = sys.argv[1]

        class Plant(Callback):
            def on_train_step_end(self, run_context):
                if run_context.original_args().cur_step_num == 3:
                    os.makedirs(os.path.join(run_dir, "control"), exist_ok=True)
                    os.mkfifo(os.path.join(run_dir, "control", "stop.json"))

        toy.train(run_dir, 8, callbacks=[Plant()])
        print("finished")
        """, str(tmp_path))
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr[-3000:]
    assert "stop.json: it is a FIFO, expected a regular file" in done.stderr
    events = spool(tmp_path)
    assert [e["step"] for e in events if e["type"] == "step"] == list(range(1, 9))
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "completed"


class AtStep(ms_train.Callback):
    """Runs ``action()`` at the end of step ``step``."""

    def __init__(self, step: int, action) -> None:
        super().__init__()
        self.step, self.action = step, action

    def on_train_step_end(self, run_context):
        if run_context.original_args().cur_step_num == self.step:
            self.action()


def test_a_stop_request_for_another_run_is_ignored_and_one_for_this_run_stops(tmp_path):
    from msdoctor.core.alerts.stop import write_stop_request
    from trainer_hooks import toy

    run_dir = tmp_path / "this-run"
    other = AtStep(3, lambda: write_stop_request(run_dir, "not you", "LossNonFinite",
                                                 run="another-run"))
    mine = AtStep(6, lambda: write_stop_request(run_dir, "loss is nan", "LossNonFinite",
                                                run="this-run"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # no run id of its own: the sidecar names the run after its directory, and so does the hook
        toy.train(str(run_dir), 20, callbacks=[other, mine], hook_options={"run": None})
    messages = [str(w.message) for w in caught]
    assert any("asks run 'another-run' to stop; this is run 'this-run'" in m for m in messages)
    events = spool(run_dir)
    assert [e["step"] for e in events if e["type"] == "step"] == list(range(1, 8))
    stops = [e for e in events if e["type"] == "stop"]
    assert len(stops) == 1 and stops[0]["step"] == 7 and stops[0]["reason"] == "loss is nan"
    assert events[-1]["status"] == "stopped"


def test_a_script_that_never_calls_on_train_end_exits_without_exception_noise(tmp_path):
    done = python("""
        import sys
        from mindspore.train.callback import RunContext, _InternalCallbackParam
        from trainer_hooks.callback import DoctorCallback

        callback = DoctorCallback(sys.argv[1], rank=0, world_size=1)
        params = _InternalCallbackParam()
        params.cur_step_num, params.cur_epoch_num = 0, 1
        context = RunContext(params)
        callback.on_train_begin(context)
        for step in range(1, 4):
            params.cur_step_num = step
            callback.on_train_step_begin(context)
            callback.on_train_step_end(context)
        print("finished")                       # no on_train_end
        """, str(tmp_path))
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr[-3000:]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr

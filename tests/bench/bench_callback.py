"""Benchmark: what DoctorCallback costs a real MindSpore training step.

(a) the callback's own time per step: every hook call is timed with
    ``perf_counter`` from a thin wrapper callback during a real ``Model.train``;
(b) steps/s with and without the callback, interleaved in the same process on the
    same compiled network (several alternating rounds, median), as a ratio.

Both are run on the default toy LM (steps of a few ms, so the per-step cost is a
visible fraction) and on the larger toy configuration (``toy.LARGE``, steps closer
to a real model's, still tiny next to an LLM step of seconds).

Run: ``.venv/bin/python tests/bench/bench_callback.py [--rounds N] [--steps N] [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mindspore.train import Callback  # noqa: E402

from trainer_hooks import toy  # noqa: E402
from trainer_hooks.callback import DoctorCallback  # noqa: E402


class Timed(Callback):
    """Forwards every hook to ``inner`` and accumulates the time spent inside it."""

    def __init__(self, inner: DoctorCallback) -> None:
        super().__init__()
        self.inner, self.seconds, self.steps = inner, 0.0, 0

    def _call(self, name: str, run_context) -> None:
        start = time.perf_counter()
        getattr(self.inner, name)(run_context)
        self.seconds += time.perf_counter() - start

    def on_train_begin(self, run_context):
        self._call("on_train_begin", run_context)

    def on_train_step_begin(self, run_context):
        self._call("on_train_step_begin", run_context)

    def on_train_step_end(self, run_context):
        self._call("on_train_step_end", run_context)
        self.steps += 1

    def on_train_end(self, run_context):
        self._call("on_train_end", run_context)

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)


def hook_cost_us(setup: toy.Toy, run_dir: str, steps: int, update_every: int) -> float:
    """Mean µs per step spent inside the hooks (train begin/end excluded)."""
    doctor = DoctorCallback(run_dir, update_every=update_every)
    timed = Timed(doctor)
    toy.train(None, steps, toy=setup, hooks=False, callbacks=[timed])
    # subtract begin/end: time them separately would need a second wrapper; they run once
    return timed.seconds / timed.steps * 1e6


def interleaved(setup: toy.Toy, run_dir: str, steps: int, rounds: int) -> tuple:
    """Median steps/s without and with the callback over alternating rounds."""
    without, with_ = [], []
    for index in range(rounds):
        order = (False, True) if index % 2 == 0 else (True, False)
        for hooks in order:
            summary = toy.train(run_dir if hooks else None, steps, toy=setup, hooks=hooks,
                                hook_options={"update_every": 50})
            (with_ if hooks else without).append(summary["steps_per_s"])
    return statistics.median(without), statistics.median(with_)


def bench(name: str, config: toy.ToyConfig, steps: int, rounds: int, loss_scale: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="msdoctor-bench-") as tmp:
        os.chdir(tmp)  # MindSpore writes kernel_meta/ etc. into the CWD
        setup = toy.build(config, loss_scale=loss_scale)
        toy.train(None, 20, toy=setup, hooks=False)  # compile + warm up
        costs = [hook_cost_us(setup, os.path.join(tmp, f"cost{i}"), steps, 50) for i in range(3)]
        base, hooked = interleaved(setup, os.path.join(tmp, "run"), steps, rounds)
        cell = "DoctorTrainOneStepCell" if loss_scale else "TrainOneStepCell"
        step_ms = 1e3 / base
        cost = statistics.median(costs)
        print(f"[{name}, {cell}] step {step_ms:.2f} ms without hooks; "
              f"hook cost {cost:.1f} us/step (median of 3 runs of {steps} steps: "
              f"{', '.join(f'{c:.1f}' for c in costs)}) = {cost / (step_ms * 10):.2f}% of a step")
        print(f"[{name}, {cell}] steps/s without {base:.1f}, with {hooked:.1f}: "
              f"ratio with/without {hooked / base:.4f} (slowdown {100 * (1 - hooked / base):+.2f}%, "
              f"median of {rounds} interleaved rounds of {steps} steps)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="fewer rounds/steps (smoke run)")
    args = parser.parse_args()
    rounds, steps = (3, 100) if args.quick else (args.rounds, args.steps)
    bench("toy", toy.ToyConfig(), steps, rounds, loss_scale=False)
    bench("toy", toy.ToyConfig(), steps, rounds, loss_scale=True)
    bench("large toy", toy.LARGE, max(50, steps // 4), rounds, loss_scale=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: what DoctorCallback costs a real MindSpore training step.

(a) the callback's own time per step: every step hook call is timed with
    ``perf_counter`` from a thin wrapper callback during a real ``Model.train``. The
    wrapper first waits for the step's outputs (``asnumpy`` of the loss) and times that
    wait separately: MindSpore dispatches a step asynchronously, so whoever reads the loss
    first waits for the step to finish; that wait is the step's own compute, not hook
    work, but reading every step does give up the host/device overlap, which (b) sees;
(a') the same own cost measured without training noise: the hooks are driven in a
    tight loop (20k steps) with a real ``RunContext`` captured from a real ``Model.train``
    of the toy (real net_outputs Tensors and inputs), reporting wall and thread-CPU
    time per step (on a loaded machine, wall includes preemption by other processes);
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
    """Forwards every hook to ``inner``; accumulates the time inside the step hooks."""

    def __init__(self, inner: DoctorCallback) -> None:
        super().__init__()
        self.inner, self.seconds, self.wait, self.steps = inner, 0.0, 0.0, 0
        self.cpu = 0.0  # thread CPU time inside the step hooks
        self.once = 0.0  # train begin + end (one-time setup and final flush)

    def on_train_begin(self, run_context):
        start = time.perf_counter()
        self.inner.on_train_begin(run_context)
        self.once += time.perf_counter() - start

    def on_train_step_begin(self, run_context):
        start, cpu = time.perf_counter(), time.thread_time()
        self.inner.on_train_step_begin(run_context)
        self.seconds += time.perf_counter() - start
        self.cpu += time.thread_time() - cpu

    def on_train_step_end(self, run_context):
        start = time.perf_counter()
        outputs = run_context.original_args().net_outputs
        (outputs[0] if isinstance(outputs, (tuple, list)) else outputs).asnumpy()
        ready, cpu = time.perf_counter(), time.thread_time()
        self.inner.on_train_step_end(run_context)
        self.wait += ready - start
        self.seconds += time.perf_counter() - ready
        self.cpu += time.thread_time() - cpu
        self.steps += 1

    def on_train_end(self, run_context):
        start = time.perf_counter()
        self.inner.on_train_end(run_context)
        self.once += time.perf_counter() - start

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)


def hook_cost_us(setup: toy.Toy, run_dir: str, steps: int, update_every: int) -> tuple:
    """(own wall µs per step in the step hooks, µs per step waiting for outputs, ms once per
    run, own thread-CPU µs per step)."""
    doctor = DoctorCallback(run_dir, update_every=update_every)
    timed = Timed(doctor)
    toy.train(None, steps, toy=setup, hooks=False, callbacks=[timed])
    return (timed.seconds / timed.steps * 1e6, timed.wait / timed.steps * 1e6, timed.once * 1e3,
            timed.cpu / timed.steps * 1e6)


class Grab(Callback):
    """Keeps the last step's real RunContext."""

    def on_train_step_end(self, run_context):
        self.run_context = run_context


def driven_cost_us(setup: toy.Toy, run_dir: str, steps: int = 20000) -> tuple:
    """(wall µs, thread-CPU µs) per step of the step hooks, driven with a real RunContext."""
    grab = Grab()
    toy.train(None, 3, toy=setup, hooks=False, callbacks=[grab])
    context = grab.run_context
    args = context.original_args()
    # 20k steps in about a second is ~50x a fast real job's event rate: a queue that holds
    # them all keeps the measurement about the hooks, not about the writer keeping up
    doctor = DoctorCallback(run_dir, update_every=50, queue_size=steps + 16)
    args.cur_step_num = 0
    doctor.on_train_begin(context)
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        args.cur_step_num += 1
        doctor.on_train_step_begin(context)
        doctor.on_train_step_end(context)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    doctor.on_train_end(context)
    assert doctor.errors == 0 and doctor.emitter.written == steps + 2, "the driven run lost events"
    return wall / steps * 1e6, cpu / steps * 1e6


def interleaved(setup: toy.Toy, run_dir: str, steps: int, rounds: int) -> tuple:
    """Median steps/s without and with the callback, and the median of the per-round
    with/without ratios (each round runs both, in alternating order, back to back, so a
    change in machine load mostly cancels within a round)."""
    without, with_, ratios = [], [], []
    for index in range(rounds):
        order = (False, True) if index % 2 == 0 else (True, False)
        speed = {}
        for hooks in order:
            summary = toy.train(run_dir if hooks else None, steps, toy=setup, hooks=hooks,
                                hook_options={"update_every": 50})
            speed[hooks] = summary["steps_per_s"]
        without.append(speed[False])
        with_.append(speed[True])
        ratios.append(speed[True] / speed[False])
    return statistics.median(without), statistics.median(with_), statistics.median(ratios)


def bench(name: str, config: toy.ToyConfig, steps: int, rounds: int, loss_scale: bool,
          driven: bool = True) -> None:
    with tempfile.TemporaryDirectory(prefix="msdoctor-bench-") as tmp:
        os.chdir(tmp)  # MindSpore writes kernel_meta/ etc. into the CWD
        setup = toy.build(config, loss_scale=loss_scale)
        toy.train(None, 20, toy=setup, hooks=False)  # compile + warm up
        if driven:
            wall, cpu = driven_cost_us(setup, os.path.join(tmp, "driven"))
            cell = "DoctorTrainOneStepCell" if loss_scale else "TrainOneStepCell"
            print(f"[{name}, {cell}] hooks driven 20000 steps with a real RunContext: "
                  f"{wall:.1f} us/step wall, {cpu:.1f} us/step thread CPU")
        runs = [hook_cost_us(setup, os.path.join(tmp, f"cost{i}"), steps, 50) for i in range(3)]
        base, hooked, ratio = interleaved(setup, os.path.join(tmp, "run"), steps, rounds)
        cell = "DoctorTrainOneStepCell" if loss_scale else "TrainOneStepCell"
        step_ms = 1e3 / base
        cost = statistics.median(r[0] for r in runs)
        wait = statistics.median(r[1] for r in runs)
        once = statistics.median(r[2] for r in runs)
        cpu = statistics.median(r[3] for r in runs)
        print(f"[{name}, {cell}] step {step_ms:.2f} ms without hooks; own hook cost "
              f"{cost:.1f} us/step wall (median of 3 runs of {steps} steps: "
              f"{', '.join(f'{r[0]:.1f}' for r in runs)}) = {cost / (step_ms * 10):.2f}% of a step, "
              f"{cpu:.1f} us/step thread CPU = {cpu / (step_ms * 10):.2f}%; "
              f"waiting for the step's outputs {wait:.0f} us/step; train begin+end {once:.1f} ms once")
        print(f"[{name}, {cell}] steps/s without {base:.1f}, with {hooked:.1f} (medians); "
              f"ratio with/without {ratio:.4f} (slowdown {100 * (1 - ratio):+.2f}%; median of "
              f"{rounds} per-round ratios, rounds of {steps} steps each way)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="fewer rounds/steps (smoke run)")
    args = parser.parse_args()
    rounds, steps = (3, 100) if args.quick else (args.rounds, args.steps)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    bench("toy", toy.ToyConfig(), steps, rounds, loss_scale=False)
    bench("toy", toy.ToyConfig(), steps, rounds, loss_scale=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    bench("large toy", toy.LARGE, max(25, steps // 8), max(3, rounds // 3), loss_scale=True,
          driven=False)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

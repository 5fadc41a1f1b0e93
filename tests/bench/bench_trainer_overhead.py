"""Hook overhead on the bundled trainer: optimizer steps/s of the tiny preset in ONE process.

The network is compiled once; then rounds of K steps alternate between three callback sets:
msdoctor's DoctorCallback, no callbacks, and MindSpore's own LossMonitor + TimeMonitor. Each
round's rate is timed by a clock callback placed last (so it includes the others' cost) from the
end of the round's first step to the end of its last. Prints the median rate of each set and the
slowdowns. Target: msdoctor's hooks cost <= 1 %.

Run: .venv/bin/python tests/bench/bench_trainer_overhead.py [--rounds R] [--steps K]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GLOG_v", "3")


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--rounds", type=int, default=8, help="rounds per callback set (default 8)")
    cli.add_argument("--steps", type=int, default=60, help="steps per round (default 60)")
    cli.add_argument("--data-dir", help="token cache (default ~/.cache/msdoctor/data)")
    opts = cli.parse_args()

    from trainer_hooks.trainer import dataset, options, tokens
    from trainer_hooks.trainer.run import make_plan

    scratch = Path(tempfile.mkdtemp(prefix="msdoctor-bench-"))
    total = opts.rounds * 3 * opts.steps
    argv = ["--run-dir", str(scratch / "run"), "--steps", str(total)]
    if opts.data_dir:
        argv += ["--data-dir", opts.data_dir]
    args = options.parse(argv)
    plan = make_plan(args)
    cache = Path(opts.data_dir) if opts.data_dir else tokens.default_cache_dir()
    token_file = tokens.build(cache, plan.preset.vocab_size)
    os.chdir(scratch)

    from mindspore.train import Callback, LossMonitor, Model, TimeMonitor

    from trainer_hooks.callback import DoctorCallback
    from trainer_hooks.trainer.session import Session

    session = Session(plan, args, {"run": "bench"}, token_file)
    cell = session.build_cell()
    model = Model(cell)
    samples = plan.samples_per_call

    class Clock(Callback):
        def __init__(self) -> None:
            super().__init__()
            self.times = []

        def on_train_step_end(self, run_context) -> None:
            self.times.append(time.perf_counter())

    def round_rate(start_step: int, callbacks: list) -> float:
        source = dataset.WindowSource(token_file.ids, plan.preset.seq_length, samples, start_step,
                                      opts.steps, args.seed)
        clock = Clock()
        model.train(1, dataset.build(source, samples, args.workers),
                    callbacks=callbacks + [clock], dataset_sink_mode=False)
        return (len(clock.times) - 1) / (clock.times[-1] - clock.times[0])

    doctor = DoctorCallback(str(scratch / "run"), config={"run": "bench"},
                            tokens_per_step=samples * plan.preset.seq_length,
                            update_every=args.update_every)
    own = time_own_cost(doctor)
    sets = {"msdoctor hooks": lambda: [doctor],
            "no hooks": lambda: [],
            "LossMonitor+TimeMonitor": lambda: [LossMonitor(1), TimeMonitor(1)]}
    devnull = open(os.devnull, "w")
    round_rate(0, [])                                    # compile + warm up
    rates = {name: [] for name in sets}
    step = opts.steps
    for r in range(opts.rounds):
        order = list(sets) if r % 2 == 0 else list(reversed(list(sets)))
        for name in order:
            stdout, sys.stdout = sys.stdout, devnull if "Monitor" in name else sys.stdout
            try:
                rates[name].append(round_rate(step, sets[name]()))
            finally:
                sys.stdout = stdout
            step += opts.steps
    median = {name: statistics.median(values) for name, values in rates.items()}
    base = median["no hooks"]
    print(f"tiny preset ({plan.preset.num_layers} layers, hidden {plan.preset.hidden_size}, "
          f"seq {plan.preset.seq_length}, batch {plan.micro_batch}), {opts.rounds} rounds x "
          f"{opts.steps} steps per set, alternating; median optimizer steps/s:")
    for name, value in median.items():
        slowdown = (base / value - 1.0) * 100.0
        spread = f"{min(rates[name]):.1f}-{max(rates[name]):.1f}"
        print(f"  {name:<24} {value:7.2f} steps/s  (rounds {spread})  "
              f"slowdown vs no hooks {slowdown:+.2f} %")
    for name, values in rates.items():
        print(f"  rounds of {name:<24} " + " ".join(f"{v:.2f}" for v in values))
    hooks = (base / median["msdoctor hooks"] - 1.0) * 100.0
    print(f"msdoctor hooks overhead: {hooks:+.2f} % (target <= 1 %)")
    per_step = sum(own.values()) / max(1, own.steps)
    print(f"msdoctor hooks' own time inside training: {per_step * 1e6:.0f} us per step "
          f"({', '.join(f'{k} {v / max(1, own.steps) * 1e6:.0f} us' for k, v in own.items())}) "
          f"= {per_step * base * 100:.2f} % of the no-hooks step ({1e3 / base:.1f} ms); less "
          "noisy than the steps/s ratio, which round-to-round load swings blur")
    return 0


class OwnTime(dict):
    """Seconds spent inside each wrapped hook method, and the steps seen."""

    steps = 0


def time_own_cost(callback) -> OwnTime:
    """Wrap ``callback``'s per-step methods with a clock (on the instance)."""
    own = OwnTime()
    for name in ("on_train_step_begin", "on_train_step_end"):
        method = getattr(callback, name)

        def timed(run_context, method=method, name=name):
            t = time.perf_counter()
            try:
                return method(run_context)
            finally:
                own[name] = own.get(name, 0.0) + time.perf_counter() - t
                if name == "on_train_step_end":
                    own.steps += 1
        setattr(callback, name, timed)
    return own


if __name__ == "__main__":
    sys.exit(main())

"""Training speed when the hooks cannot write: steps/s of a real MindSpore run (the toy LM's
larger configuration, GRAPH mode, CPU) in ONE process, rounds interleaved between:

- ``no hooks``: no callback at all (reference);
- ``hooks writing``: DoctorCallback appending to a normal spool (no sidecar: the hooks never
  talk to one, so "sidecar absent" is this case);
- ``hooks, spool unwritable``: the run directory lies under a regular file (ENOTDIR; root
  ignores chmod), every write fails;
- ``hooks, disk full``: the spool is on a 64 KiB tmpfs filled up (ENOSPC), if mount works here;
  else a file-size limit cannot be scoped to the hooks, and that case is skipped.

Each round's rate is timed by a clock callback placed last, from the end of the round's first
step to the end of its last; the process CPU time per step is taken over the same span (less
sensitive than wall time to other work on a shared machine). Prints the median (and min-max)
per case, the slowdowns of the medians, and the median of the per-round ratios (rounds are
adjacent in time, so this pairing cancels most of the drift of a shared machine).
Target: failing hooks cost <= 1 % against writing hooks.

Run: .venv/bin/python tests/bench/bench_degraded.py [--rounds R] [--steps K]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("GLOG_v", "3")

from disk import mount_full_tmpfs, unmount  # noqa: E402


def full_tmpfs(base: Path):
    mount, why = mount_full_tmpfs(base)
    if mount is None:
        print(f"# disk-full case skipped: cannot mount a tmpfs ({why})")
    return mount


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--rounds", type=int, default=16, help="rounds per case (default 16)")
    cli.add_argument("--steps", type=int, default=15, help="steps per round (default 15)")
    opts = cli.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="msdoctor-bench-degraded-"))
    os.chdir(scratch)
    warnings.simplefilter("ignore")

    from mindspore.train import Callback

    from trainer_hooks import toy as toy_module

    class Clock(Callback):
        def __init__(self) -> None:
            super().__init__()
            self.times = []

        def on_train_step_end(self, run_context) -> None:
            self.times.append((time.perf_counter(), time.process_time()))

    built = toy_module.build(toy_module.LARGE)
    blocker = scratch / "not-a-directory"
    blocker.write_text("a file where the run directory should be\n")
    mount = full_tmpfs(scratch)
    cases = {"no hooks": None, "hooks writing": scratch / "run",
             "hooks, spool unwritable": blocker / "run"}
    if mount is not None:
        cases["hooks, disk full"] = mount / "run"
    rates = {name: [] for name in cases}
    cpu = {name: [] for name in cases}                # process CPU seconds per step
    counters = {name: [0, 0, 0] for name in cases}     # emitted, written, dropped
    toy_module.train(None, 10, toy=built, hooks=False)  # compile + warm up
    try:
        for r in range(opts.rounds):
            order = list(cases) if r % 2 == 0 else list(reversed(list(cases)))
            for name in order:
                clock = Clock()
                run_dir = cases[name]
                summary = toy_module.train(str(run_dir) if run_dir else None, opts.steps,
                                           toy=built, hooks=run_dir is not None,
                                           callbacks=[clock])
                (w0, c0), (w1, c1) = clock.times[0], clock.times[-1]
                rates[name].append((len(clock.times) - 1) / (w1 - w0))
                cpu[name].append((c1 - c0) / (len(clock.times) - 1))
                doctor = summary["callback"]
                if doctor is not None and doctor.emitter is not None:
                    e = doctor.emitter
                    c = counters[name]
                    c[0] += e.emitted
                    c[1] += e.written
                    c[2] += e.dropped
    finally:
        if mount is not None:
            unmount(mount)
    print(f"# toy LM (LARGE), {opts.rounds} interleaved rounds x {opts.steps} steps per case, "
          f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f} on {os.cpu_count()} CPUs")
    ref = statistics.median(rates["hooks writing"])
    bare = statistics.median(rates["no hooks"])
    writing = rates["hooks writing"]
    for name, values in rates.items():
        med = statistics.median(values)
        paired = statistics.median(w / v for w, v in zip(writing, values))   # same round
        cpu_paired = statistics.median(v / w for w, v in zip(cpu["hooks writing"], cpu[name]))
        extra_pair = (f"  paired slowdown vs writing (median of per-round ratios): wall "
                      f"{100 * (paired - 1):+6.2f} %, CPU per step {100 * (cpu_paired - 1):+6.2f} %"
                      f" (median {statistics.median(cpu[name]) * 1e3:.0f} ms CPU/step)")
        emitted, written, dropped = counters[name]
        extra = f"  events emitted {emitted} written {written} dropped {dropped}" if emitted else ""
        print(f"{name:26s} {med:7.2f} steps/s (min {min(values):.2f}, max {max(values):.2f})  "
              f"vs writing {100 * (ref - med) / ref:+6.2f} %  vs no hooks "
              f"{100 * (bare - med) / bare:+6.2f} %{extra}\n{'':26s}{extra_pair}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

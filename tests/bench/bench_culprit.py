"""Culprit accuracy: how often an alert names the layer a per-layer fault was injected into.

For each seed, one process trains the tiny Llama with ``--blocks`` decoder blocks (compiled once)
and injects a fault every ``--every`` steps into a block drawn at random: a gradient spike
(block L's gradients x1000, as ``grad-layer@S:L``) or a NaN (block L's output made non-finite,
as ``nan-layer@S:L``). The spool then goes through ``msdoctor replay``'s pipeline; each injected
fault is matched with the alert that fired at its step (GradNormSpike, LossNonFinite) and its
``layer`` label is compared with ``layers.L``. Prints the accuracy per kind and overall
(target >= 95 %), next to the number of faults that raised no alert at all.

Run: .venv/bin/python tests/bench/bench_culprit.py [--seeds 1 2] [--faults 8] [--blocks 4]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GLOG_v", "3")


def train_with_faults(seed: int, blocks: int, faults: int, every: int, scratch: Path) -> list:
    """Train one seed with the fault schedule; return [(step, kind, block)] and the run dir."""
    from mindspore.train import Callback, Model

    from trainer_hooks.callback import DoctorCallback
    from trainer_hooks.trainer import dataset, injection, options, tokens
    from trainer_hooks.trainer.presets import PRESETS
    from trainer_hooks.trainer.run import make_plan
    from trainer_hooks.trainer.session import Session

    rng = np.random.default_rng(seed)
    first = 30
    schedule = [(first + i * every, ("grad", "nan")[i % 2], int(rng.integers(blocks)))
                for i in range(faults)]
    steps = first + faults * every
    run_dir = scratch / f"seed-{seed}"
    args = options.parse(["--run-dir", str(run_dir), "--steps", str(steps), "--seed", str(seed)])
    args.boost_all = True
    plan = make_plan(args)
    plan.preset = dataclasses.replace(PRESETS["tiny"], num_layers=blocks)
    token_file = tokens.build(tokens.default_cache_dir(), plan.preset.vocab_size)
    os.chdir(scratch)
    session = Session(plan, args, {"run": f"seed-{seed}"}, token_file)
    args.injections.nan_layer = (0, 0)          # probes with a poison switch on every block:
    import trainer_hooks.probes as probes  # the schedule below picks one per fault
    attach = probes.attach
    probes.attach = lambda net, _blocks: attach(net, range(blocks))
    try:
        cell = session.build_cell()
    finally:
        probes.attach = attach
    switches = session.switches

    class Faults(Callback):
        def on_train_step_begin(self, run_context) -> None:
            step = run_context.original_args().cur_step_num
            for at, kind, block in schedule:
                if step in (at, at + 1):
                    (injection.boost if kind == "grad" else injection.poison)(
                        switches, block, step == at)

    samples = plan.samples_per_call
    source = dataset.WindowSource(token_file.ids, plan.preset.seq_length, samples, 0, steps, seed)
    doctor = DoctorCallback(str(run_dir), run=f"seed-{seed}",
                            tokens_per_step=samples * plan.preset.seq_length)
    Model(cell).train(1, dataset.build(source, samples, 1), callbacks=[Faults(), doctor],
                      dataset_sink_mode=False)
    return schedule, run_dir


def judge(schedule: list, run_dir: Path) -> list:
    """[(kind, expected layer, named layer or None)] from the replayed alerts."""
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          capture_output=True, text=True, cwd=str(ROOT))
    alerts = json.loads(done.stdout)["alerts"]
    out = []
    for step, kind, block in schedule:
        wanted = "GradNormSpike" if kind == "grad" else "LossNonFinite"
        hit = next((a for a in alerts if a["alert"] == wanted and a["step"] == step), None)
        out.append((kind, f"layers.{block}", None if hit is None else hit["labels"].get("layer", "")))
    return out


def report(results: list, seeds: list, blocks: int) -> str:
    """Accuracy per kind and overall, among the faults that started an alert at their step (an
    alert already firing from an earlier spike does not start again: counted apart)."""
    lines = []
    for kind in ("grad", "nan"):
        rows = [r for r in results if r[0] == kind]
        alerted = [r for r in rows if r[2] is not None]
        right = sum(1 for r in alerted if r[1] == r[2])
        lines.append(f"  {kind:<5} faults {len(rows):3d}  started an alert {len(alerted):3d}  culprit "
                     f"named right {right:3d} ({100.0 * right / max(1, len(alerted)):.1f} %)")
    alerted = [r for r in results if r[2] is not None]
    right = sum(1 for r in alerted if r[1] == r[2])
    lines.append(f"culprit layer accuracy: {100.0 * right / max(1, len(alerted)):.1f} % of "
                 f"{len(alerted)} alerts started by {len(results)} injected faults over seeds "
                 f"{seeds} and {blocks} blocks (target >= 95 %)")
    return "\n".join(lines)


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    cli.add_argument("--faults", type=int, default=8, help="faults per seed (default 8)")
    cli.add_argument("--every", type=int, default=30,
                     help="steps between faults (default 30: GradNormSpike keeps firing 20 steps)")
    cli.add_argument("--blocks", type=int, default=4, help="decoder blocks (default 4)")
    opts = cli.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="msdoctor-culprit-"))
    results = []
    for seed in opts.seeds:
        import subprocess

        code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); "
                f"from tests.bench.bench_culprit import train_with_faults; from pathlib import Path; "
                f"s, d = train_with_faults({seed}, {opts.blocks}, {opts.faults}, {opts.every}, "
                f"Path({str(scratch)!r})); print('SCHEDULE', json.dumps([s, str(d)]))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        line = next((x for x in done.stdout.splitlines() if x.startswith("SCHEDULE ")), None)
        if line is None:
            print(done.stdout[-2000:], done.stderr[-4000:])
            return 1
        import json

        schedule, run_dir = json.loads(line[len("SCHEDULE "):])
        results += judge([tuple(x) for x in schedule], Path(run_dir))
    print(report(results, opts.seeds, opts.blocks))
    wrong = [r for r in results if r[1] != r[2]]
    for r in wrong:
        print(f"  missed: {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

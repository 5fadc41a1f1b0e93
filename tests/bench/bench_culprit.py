"""Culprit accuracy: how often an alert names the layer a per-layer fault was injected into.

For each seed, one process trains the tiny Llama with ``--blocks`` decoder blocks (compiled once)
and injects a fault every ``--every`` steps into a block drawn at random: a gradient spike
(block L's gradients x1000, as ``grad-layer@S:L``) or a NaN (block L's output made non-finite,
as ``nan-layer@S:L``). The spool then goes through ``msdoctor replay``'s pipeline; each injected
fault is matched with the alert that fired at its step (GradNormSpike, LossNonFinite) and its
``layer`` label is compared with ``layers.L``.

The two faults that shape the whole run get one short run per (seed, block), as the trainer's
``--inject`` does them: a frozen block (``frozen-layer:L``: block L left out of the optimizer;
matched with LayerFrozen, which fires at the first sampled update ratio) and a block skipped at
loading (``skip-load:L`` with ``--init-from``: one clean run per seed writes the checkpoint, then
each block's run starts from the model's initial values with that checkpoint loaded except block
L's keys; matched with the pre-flight LayersNotLoaded). Those runs share one process per seed:
one compiled cell per frozen block, one for the clean run and all its skip-load runs.

Prints the accuracy per kind and over all four kinds (target >= 95 %), next to the number of
faults that raised no alert at all, and the misses.

Run: .venv/bin/python tests/bench/bench_culprit.py [--seeds 1 2] [--faults 8] [--blocks 4]
     [--kinds grad nan frozen skip-load] [--frozen-steps 12]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

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


def _session(seed: int, blocks: int, run_dir: Path, steps: int, *argv: str):
    """A trainer session of the tiny preset with ``blocks`` blocks, its cell built."""
    from trainer_hooks.trainer import options, tokens
    from trainer_hooks.trainer.presets import PRESETS
    from trainer_hooks.trainer.run import make_plan
    from trainer_hooks.trainer.session import Session

    args = options.parse(["--run-dir", str(run_dir), "--steps", str(steps), "--seed", str(seed),
                          *argv])
    tiny = PRESETS["tiny"]                 # the plan checks --inject's block against the preset
    PRESETS["tiny"] = dataclasses.replace(tiny, num_layers=blocks)
    try:
        plan = make_plan(args)
    finally:
        PRESETS["tiny"] = tiny
    token_file = tokens.build(tokens.default_cache_dir(), plan.preset.vocab_size)
    session = Session(plan, args, {"run": run_dir.name}, token_file)
    return session, session.build_cell()


def _train(session, cell, steps: int, run_dir: Optional[Path], config: Optional[dict] = None):
    """``steps`` steps of ``cell`` from the start of the data, the hooks writing to ``run_dir``."""
    from mindspore.train import Model

    from trainer_hooks.callback import DoctorCallback
    from trainer_hooks.trainer import dataset

    plan, seed = session.plan, session.args.seed
    samples = plan.samples_per_call
    source = dataset.WindowSource(session.token_file.ids, plan.preset.seq_length, samples, 0,
                                  steps, seed)
    hooks = [] if run_dir is None else [DoctorCallback(
        str(run_dir), run=run_dir.name, config=config or {}, update_every=session.args.update_every,
        tokens_per_step=samples * plan.preset.seq_length)]
    Model(cell).train(1, dataset.build(source, samples, 1), callbacks=hooks,
                      dataset_sink_mode=False)


def train_layer_runs(seed: int, blocks: int, steps: int, scratch: Path) -> list:
    """Per block, a frozen-block run and a skip-load run; return [(kind, block, run dir)]."""
    import mindspore as ms

    from trainer_hooks.trainer import checkpoint

    os.chdir(scratch)
    out = []
    for block in range(blocks):
        run_dir = scratch / f"seed-{seed}-frozen-{block}"
        session, cell = _session(seed, blocks, run_dir, steps, "--inject", f"frozen-layer:{block}")
        _train(session, cell, steps, run_dir)
        out.append(("frozen", block, str(run_dir)))
    clean = scratch / f"seed-{seed}-clean"
    session, cell = _session(seed, blocks, clean, steps)
    initial = {p.name: p.asnumpy().copy() for p in cell.get_parameters()}
    _train(session, cell, steps, None)
    ckpt = checkpoint.save(cell, clean, 0, steps, 0, 1)
    for block in range(blocks):          # as a fresh process: initial values, then the load
        for param in cell.get_parameters():
            param.set_data(ms.Tensor(initial[param.name]))
        checkpoint.load_weights(session.network, str(ckpt), block)
        run_dir = scratch / f"seed-{seed}-skip-load-{block}"
        _train(session, cell, 2, run_dir, {"init_from": str(ckpt), "loaded_weights": 1})
        out.append(("skip-load", block, str(run_dir)))
    return out


#: kind -> the alert that names its culprit
ALERTS = {"grad": "GradNormSpike", "nan": "LossNonFinite", "frozen": "LayerFrozen",
          "skip-load": "LayersNotLoaded"}


def _replay(run_dir: Path) -> list:
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          capture_output=True, text=True, cwd=str(ROOT))
    return json.loads(done.stdout)["alerts"]


def judge(schedule: list, run_dir: Path) -> list:
    """[(kind, expected layer, named layer or None)] from the replayed alerts."""
    alerts = _replay(run_dir)
    out = []
    for step, kind, block in schedule:
        wanted = ALERTS[kind]
        hit = next((a for a in alerts if a["alert"] == wanted and a["step"] == step), None)
        out.append((kind, f"layers.{block}", None if hit is None else hit["labels"].get("layer", "")))
    return out


def judge_runs(runs: list) -> list:
    """[(kind, expected layer, named layer or None)]: the first alert of each run's kind."""
    out = []
    for kind, block, run_dir in runs:
        hit = next((a for a in _replay(Path(run_dir)) if a["alert"] == ALERTS[kind]), None)
        out.append((kind, f"layers.{block}", None if hit is None else hit["labels"].get("layer", "")))
    return out


def report(results: list, seeds: list, blocks: int, kinds: Sequence[str] = ("grad", "nan")) -> str:
    """Accuracy per kind and overall, among the faults that started an alert at their step (an
    alert already firing from an earlier spike does not start again: counted apart)."""
    lines = []
    for kind in kinds:
        rows = [r for r in results if r[0] == kind]
        alerted = [r for r in rows if r[2] is not None]
        right = sum(1 for r in alerted if r[1] == r[2])
        lines.append(f"  {kind:<9} faults {len(rows):3d}  started an alert {len(alerted):3d}  culprit "
                     f"named right {right:3d} ({100.0 * right / max(1, len(alerted)):.1f} %)")
    alerted = [r for r in results if r[2] is not None]
    right = sum(1 for r in alerted if r[1] == r[2])
    lines.append(f"culprit layer accuracy: {100.0 * right / max(1, len(alerted)):.1f} % of "
                 f"{len(alerted)} alerts started by {len(results)} injected faults over seeds "
                 f"{seeds} and {blocks} blocks (target >= 95 %)")
    named = sum(1 for r in results if r[1] == r[2])
    lines.append(f"culprit named right over all {len(results)} faults of {', '.join(kinds)}: "
                 f"{named} ({100.0 * named / max(1, len(results)):.1f} %, target >= 95 %)")
    return "\n".join(lines)


def _child(call: str, tag: str) -> Optional[list]:
    """Run ``call`` (an expression of this module) in a fresh process; its JSON result."""
    import json
    import subprocess

    code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
            f"from tests.bench.bench_culprit import *; print({tag!r}, json.dumps({call}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    line = next((x for x in done.stdout.splitlines() if x.startswith(tag + " ")), None)
    if line is None:
        print(done.stdout[-2000:], done.stderr[-4000:])
        return None
    return json.loads(line[len(tag) + 1:])


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    cli.add_argument("--faults", type=int, default=8, help="faults per seed (default 8)")
    cli.add_argument("--every", type=int, default=30,
                     help="steps between faults (default 30: GradNormSpike keeps firing 20 steps)")
    cli.add_argument("--blocks", type=int, default=4, help="decoder blocks (default 4)")
    cli.add_argument("--kinds", nargs="+", choices=tuple(ALERTS), default=list(ALERTS),
                     help="fault kinds (default all four)")
    cli.add_argument("--frozen-steps", type=int, default=12,
                     help="steps of each frozen-block run and of the clean run before the "
                          "skip-load runs (default 12: the update ratio is sampled at step 10)")
    opts = cli.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="msdoctor-culprit-"))
    began, cpu = time.perf_counter(), _cpu()
    results = []
    for seed in opts.seeds:
        if {"grad", "nan"} & set(opts.kinds):
            got = _child(f"(lambda s, d: [s, str(d)])(*train_with_faults({seed}, {opts.blocks}, "
                         f"{opts.faults}, {opts.every}, Path({str(scratch)!r})))", "SCHEDULE")
            if got is None:
                return 1
            schedule, run_dir = got
            results += [r for r in judge([tuple(x) for x in schedule], Path(run_dir))
                        if r[0] in opts.kinds]
        if {"frozen", "skip-load"} & set(opts.kinds):
            runs = _child(f"train_layer_runs({seed}, {opts.blocks}, {opts.frozen_steps}, "
                          f"Path({str(scratch)!r}))", "RUNS")
            if runs is None:
                return 1
            results += judge_runs([r for r in runs if r[0] in opts.kinds])
    kinds = [k for k in ALERTS if k in opts.kinds]
    print(report(results, opts.seeds, opts.blocks, kinds))
    wrong = [r for r in results if r[1] != r[2]]
    for r in wrong:
        print(f"  missed: {r}")
    print(f"took {time.perf_counter() - began:.0f} s wall, {_cpu() - cpu:.0f} s CPU (this process "
          f"and its children); load average {os.getloadavg()[0]:.2f}")
    return 0


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    sys.exit(main())

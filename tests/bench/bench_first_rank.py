"""First-rank accuracy: in two-rank runs where one rank goes first, how often the alerts name it.

Each case is a spool of two ranks written with the real codec (layers events before step events,
as the hooks write them). One rank, drawn at random, goes non-finite (a NaN in a random block's
activations) or spikes (one block's gradients x1000) first; the other follows 0-3 steps later
(0: the same step, a fraction of a second later). The spool goes through the replay pipeline
(``msdoctor replay``'s ``evaluate_spool``); each rank's LossNonFinite / GradNormSpike alert must
carry ``first_rank`` = the rank that went first, and ``layer`` = its block. Prints the accuracy
(target >= 95 %).

Run: .venv/bin/python tests/bench/bench_first_rank.py [--cases 40]
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

NAMES = ["embedding", "layers.0", "layers.1", "layers.2", "layers.3", "norm_out", "lm_head"]


def write(run_dir: Path, rank: int, steps: int, at: int, kind: str, block: int, lag_s: float,
          rng: np.random.Generator) -> None:
    from msdoctor.wire import encode, make

    lines = [encode(make("run_start", rank, run="r", world_size=2, t=1000.0))]
    for s in range(1, steps + 1):
        t = 1000.0 + s + (lag_s if s == at else 0.0)
        grads = [float(x) for x in 1.0 + 0.05 * rng.random(len(NAMES))]
        acts = [None] + [float(x) for x in 2.0 + 0.1 * rng.random(4)] + [None, None]
        loss = 5.0 - 0.01 * s + 0.01 * float(rng.random())
        if s == at and kind == "grad":
            grads[1 + block] *= 1000.0
        if s == at and kind == "nan":
            acts = [None] + [a if b < block else math.nan for b, a in enumerate(acts[1:5])] + [None, None]
            grads, loss = [math.nan] * len(NAMES), math.nan
        lines.append(encode(make("layers", rank, run="r", step=s, t=t, names=NAMES,
                                 grad_norm=grads, act_max=acts)))
        lines.append(encode(make("step", rank, run="r", step=s, t=t, loss=loss,
                                 grad_norm=float(np.sqrt(np.sum(np.square(grads)))), lr=1e-4,
                                 step_time_s=1.0)))
    path = run_dir / "events" / f"rank-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--cases", type=int, default=40)
    cli.add_argument("--seed", type=int, default=0)
    opts = cli.parse_args()
    from msdoctor.core.engine import default_rules_dir, load_rules
    from msdoctor.replay.driver import evaluate_spool

    rules = load_rules([default_rules_dir()])
    rng = np.random.default_rng(opts.seed)
    scratch = Path(tempfile.mkdtemp(prefix="msdoctor-first-rank-"))
    checks = right_rank = right_layer = 0
    for case in range(opts.cases):
        kind = ("nan", "grad")[case % 2]
        first, block, lag = int(rng.integers(2)), int(rng.integers(4)), int(rng.integers(4))
        at = 50
        run_dir = scratch / f"case-{case}"
        for rank in (0, 1):
            later = rank != first
            write(run_dir, rank, 70, at + (lag if later else 0), kind, block,
                  0.3 if later and lag == 0 else 0.0, rng)
        result, _ = evaluate_spool(run_dir, rules)
        wanted = "LossNonFinite" if kind == "nan" else "GradNormSpike"
        fired = [a for a in result["alerts"] if a["alert"] == wanted]
        for rank in (0, 1):
            alert = next((a for a in fired if a["rank"] == rank), None)
            checks += 1
            labels = (alert or {}).get("labels", {})
            right_rank += labels.get("first_rank") == str(first)
            right_layer += labels.get("layer") == f"layers.{block}"
    print(f"{opts.cases} two-rank cases (NaN and gradient spikes, the second rank 0-3 steps "
          f"later), {checks} alerts checked:")
    print(f"first rank named right: {100.0 * right_rank / checks:.1f} % (target >= 95 %)")
    print(f"culprit layer named right: {100.0 * right_layer / checks:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

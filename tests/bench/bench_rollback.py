"""Automatic rollback against ``bad-data`` on the bundled trainer, over seeds.

Per seed, three real runs of the tiny preset, each with its own ``msdoctor serve``:
a clean run; ``--inject bad-data@STEP:N`` with the shipped rules (no action); the same
injection with LossSpike's action set to ``rollback``. A run "ends within 2 %" when the mean
loss of its last ``--tail`` steps is within 2 % of the clean run's over the same steps (the mean,
because a skipped run reads other batches than the clean one at the same step). Prints, per
seed and over all: the gap to the clean run with and without rollback, and the rollbacks the
spool records (``action`` events). Target: >= 90 % of the rollback runs within 2 % with exactly
one rollback; the runs without it measurably worse.

Run: .venv/bin/python tests/bench/bench_rollback.py [--seeds 1 2 3] [--steps 240]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def rules_with_rollback(target: Path) -> Path:
    """The shipped rules, LossSpike with ``action: rollback``."""
    shutil.copytree(ROOT / "rules", target, ignore=shutil.ignore_patterns("tests", "prometheus"))
    loss = target / "loss.yaml"
    text = loss.read_text()
    marker = "      - alert: LossSpike\n"
    assert marker in text
    loss.write_text(text.replace(marker, marker + "        action: rollback\n", 1))
    return target


def train(run_dir: Path, cache: Path, rules: Optional[Path], argv: List[str],
          timeout: float) -> Dict[str, object]:
    """One run with its sidecar; the steps' losses and the actions recorded."""
    from tests.servers import free_port

    env = dict(os.environ, PYTHONPATH=str(ROOT), GLOG_v="3")
    run_dir.mkdir(parents=True)
    serve = [sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(run_dir),
             "--listen", f"127.0.0.1:{free_port()}"]
    if rules:
        serve += ["--no-default-rules", "--rules", str(rules)]
    log = open(run_dir.parent / f"{run_dir.name}.serve.log", "w")
    sidecar = subprocess.Popen(serve, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(2.0)
        done = subprocess.run([sys.executable, "-m", "trainer_hooks.trainer", "--run-dir",
                               str(run_dir), "--data-dir", str(cache), "--log-every", "1000",
                               *argv], env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=str(run_dir.parent))
        if done.returncode != 0:
            raise SystemExit(f"trainer failed in {run_dir}:\n{done.stderr[-2000:]}")
        time.sleep(1.5)
    finally:
        sidecar.terminate()
        sidecar.wait(timeout=30)
        log.close()
    events = [json.loads(line) for line in (run_dir / "events" / "rank-0.jsonl").open()]
    loss: Dict[int, float] = {}
    for e in events:                         # the last pass over a step wins (after a rollback)
        if e["type"] == "step" and isinstance(e.get("loss"), (int, float)):
            loss[e["step"]] = float(e["loss"])
    actions = [e for e in events if e["type"] == "action"]
    return {"loss": loss, "rollbacks": sum(1 for a in actions if a["action"] == "rollback"),
            "actions": [a["action"] for a in actions]}


def tail_mean(loss: Dict[int, float], last: int, tail: int) -> float:
    values = [loss[s] for s in range(last - tail + 1, last + 1) if s in loss]
    return sum(values) / len(values)


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    cli.add_argument("--steps", type=int, default=240)
    cli.add_argument("--bad", default="60:20", help="bad-data STEP:N (default 60:20)")
    cli.add_argument("--save-every", type=int, default=25)
    cli.add_argument("--tail", type=int, default=20, help="steps the end loss is averaged over")
    cli.add_argument("--data-dir", help="token cache (default ~/.cache/msdoctor/data)")
    cli.add_argument("--timeout", type=float, default=1800.0)
    opts = cli.parse_args()

    from trainer_hooks.trainer import tokens

    scratch = Path(tempfile.mkdtemp(prefix="msdoctor-rollback-"))
    cache = Path(opts.data_dir) if opts.data_dir else tokens.default_cache_dir()
    rules = rules_with_rollback(scratch / "rules-rollback")
    common = ["--steps", str(opts.steps), "--save-every", str(opts.save_every), "--keep", "3"]
    within, one, worse, rows = 0, 0, 0, []
    for seed in opts.seeds:
        base = common + ["--seed", str(seed)]
        clean = train(scratch / f"clean-{seed}", cache, None, base, opts.timeout)
        plain = train(scratch / f"bad-{seed}", cache, None,
                      base + ["--inject", f"bad-data@{opts.bad}"], opts.timeout)
        rolled = train(scratch / f"rollback-{seed}", cache, rules,
                       base + ["--inject", f"bad-data@{opts.bad}"], opts.timeout)
        ref = tail_mean(clean["loss"], opts.steps, opts.tail)           # type: ignore[arg-type]
        gap_plain = tail_mean(plain["loss"], opts.steps, opts.tail) / ref - 1   # type: ignore[arg-type]
        gap_roll = tail_mean(rolled["loss"], opts.steps, opts.tail) / ref - 1   # type: ignore[arg-type]
        ok = abs(gap_roll) <= 0.02 and rolled["rollbacks"] == 1
        within += ok
        one += rolled["rollbacks"] == 1
        worse += gap_plain > 0.02
        rows.append((seed, ref, gap_plain, gap_roll, rolled["rollbacks"], rolled["actions"]))
        print(f"seed {seed}: clean end loss {ref:.4f}; without rollback {gap_plain:+.2%}; "
              f"with rollback {gap_roll:+.2%}, rollbacks {rolled['rollbacks']} "
              f"(actions {rolled['actions']})", flush=True)
    n = len(opts.seeds)
    print(f"\nbad-data@{opts.bad}, {opts.steps} steps, end loss = mean of the last {opts.tail} steps")
    print(f"with rollback: {within}/{n} within 2 % of the clean run with exactly one rollback "
          f"({one}/{n} with exactly one); target >= 90 %")
    print(f"without: {worse}/{n} more than 2 % worse; mean gap "
          f"{sum(r[2] for r in rows) / n:+.2%} (with rollback {sum(r[3] for r in rows) / n:+.2%})")
    print(f"runs kept in {scratch}")
    return 0 if within >= 0.9 * n else 1


if __name__ == "__main__":
    sys.exit(main())

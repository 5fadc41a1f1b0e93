"""The bundled trainer's main: plan the run, build data/model/cell, train with the hooks on.

Order matters for speed and for clean failure: options, the run directory and the token file are
dealt with before MindSpore is imported, so a bad option or a refused directory costs no startup.
MindSpore and MindFormers write logs and kernel caches into the working directory, so training
runs inside ``<run_dir>/work``.
"""
from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from trainer_hooks.trainer import options, rundir, schedule
from trainer_hooks.trainer.injection import LOW_LOSS_SCALE, LR_HIGH_FACTOR
from trainer_hooks.trainer.presets import PRESETS, Preset, parameter_count

ADAM_BETAS = (0.9, 0.95)
WEIGHT_DECAY = 0.1
CLIP_NORM = 1.0
LOSS_SCALE_START = 2.0 ** 16


@dataclass
class Plan:
    """Every resolved setting of one run (what ``config.json`` records)."""

    preset: Preset
    steps: int
    precision: str
    grad_accum: int
    micro_batch: int
    lr: float
    warmup: int
    save_every: int
    rank: int
    world: int
    run_dir: Path
    cell_calls_per_step: int   # 1, or grad_accum with the accum-mismatch fault
    hang_after_s: Optional[float] = None   # run_start.expect.hang_after_s (None: not declared)

    @property
    def samples_per_call(self) -> int:
        return self.micro_batch * (1 if self.cell_calls_per_step > 1 else self.grad_accum)


def _rank_world() -> tuple:
    rank = int(os.environ.get("RANK_ID", os.environ.get("RANK", "0")) or 0)
    world = int(os.environ.get("RANK_SIZE", os.environ.get("WORLD_SIZE", "1")) or 1)
    return rank, world


def make_plan(args) -> Plan:
    """Resolve defaults and refuse combinations the device cannot run (``options.UsageError``)."""
    preset = PRESETS[args.preset]
    inj = args.injections
    cpu = args.device == "CPU"
    precision = args.precision or ("fp32" if cpu else preset.precision)
    if inj.loss_scale_low:
        if args.precision not in (None, "fp16"):
            raise options.UsageError(f"--inject loss-scale-low needs fp16 loss scaling, "
                                     f"got --precision {args.precision}")
        precision = "fp16"
    if precision == "bf16" and cpu:
        raise options.UsageError("--precision bf16 is not supported on CPU (MindSpore's CPU MatMul "
                                 "and Gather have no bf16 kernels); use fp32 (default) or fp16")
    grad_accum = args.grad_accum or preset.grad_accum
    if inj.accum_mismatch and grad_accum < 2:
        grad_accum = 4 if args.grad_accum is None else grad_accum
        if grad_accum < 2:
            raise options.UsageError("--inject accum-mismatch needs --grad-accum >= 2")
    if cpu and not preset.cpu_ok:
        raise options.UsageError(f"preset {preset.name} is too large for a CPU; use tiny or small")
    steps = args.steps or preset.steps
    lr = (args.lr or preset.lr) * (LR_HIGH_FACTOR if inj.lr_high else 1.0)
    rank, world = _rank_world()
    run_dir = Path(args.run_dir) if args.run_dir else rundir.default_run_dir(preset.name)
    return Plan(preset, steps, precision, grad_accum, args.micro_batch or preset.micro_batch, lr,
                schedule.warmup_steps(steps), args.save_every or min(preset.save_every, steps),
                rank, world, run_dir.resolve(),
                grad_accum if inj.accum_mismatch else 1,
                args.hang_after_s or preset.hang_after_s or None)


def launch_run_id(plan: Plan) -> str:
    """The run id of a new run: the directory's name, plus the start time for a single rank (the
    ranks of a multi-rank launch cannot agree on a time without talking to each other)."""
    return plan.run_dir.name if plan.world > 1 else f"{plan.run_dir.name}-{int(time.time())}"


def parallel_mode(plan: Plan, device: str) -> str:
    """``stand_alone``; ``data_parallel`` (gradients all-reduced) on GPU/Ascend; on a CPU the ranks
    of a multi-rank launch are independent replicas on their own data shards (no collective)."""
    if plan.world == 1:
        return "stand_alone"
    return "data_parallel" if device != "CPU" else "independent_replicas"


def describe(plan: Plan, args, data: Dict[str, Any], run_id: str) -> Dict[str, Any]:
    """The full run config: ``config.json`` and ``run_start.config``."""
    p = plan.preset
    seq = p.seq_length
    scale = loss_scale_of(plan, args)
    return {
        "run": run_id, "model": "LlamaForCausalLM", "preset": p.name,
        "model_config": {k: v for k, v in p.llama_fields().items() if k not in ("batch_size",)},
        "params": parameter_count(p), "vocab_size": p.vocab_size,
        "seq_length": seq, "micro_batch": plan.micro_batch, "grad_accum": plan.grad_accum,
        "global_batch": plan.micro_batch * plan.grad_accum * plan.world,
        "tokens_per_step": plan.micro_batch * plan.grad_accum * seq * plan.world,
        "precision": plan.precision, "total_steps": plan.steps,
        "optimizer": "AdamWeightDecay", "betas": list(ADAM_BETAS), "weight_decay": WEIGHT_DECAY,
        "lr": plan.lr, "lr_schedule": {"kind": "warmup_cosine", "warmup_steps": plan.warmup,
                                       "min_lr": plan.lr * 0.1},
        "clip_norm": CLIP_NORM,
        "loss_scaling": {"kind": "dynamic" if scale[2] else "fixed", "init": scale[0],
                         "factor": 2, "window": scale[1]} if scale else {"kind": "none"},
        # the job's time scale for its loss scale to move (rules read it: LossScaleStuck)
        **({"loss_scale_window": scale[1]} if scale else {}),
        "seed": args.seed, "rank_seed": args.seed + plan.rank,
        "parallel": {"mode": parallel_mode(plan, args.device), "device_num": plan.world},
        "device_target": args.device, "mode": "graph",
        "data": data, "checkpoint": {"every": plan.save_every, "keep": args.keep,
                                     "dir": str(plan.run_dir / "checkpoints")},
        "inject": args.injections.as_config(), "hooks": not args.no_hooks,
        "versions": _versions(), "argv": sys.argv[1:],
    }


def loss_scale_of(plan: Plan, args) -> Optional[tuple]:
    """(initial scale, growth window, dynamic?) of fp16 loss scaling; None without loss scaling.

    The window is the preset's (a short run needs a short one to let the scale move); with
    ``loss-scale-low`` the cell gets a fixed low scale instead of the dynamic update cell.
    """
    if plan.precision != "fp16":
        return None
    if args.injections.loss_scale_low:
        return LOW_LOSS_SCALE, plan.preset.loss_scale_window, False
    return LOSS_SCALE_START, plan.preset.loss_scale_window, True


def _versions() -> Dict[str, str]:
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in ("mindspore", "mindformers", "tokenizers", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = options.parse(argv, prog="msdoctor train")
    try:
        plan = make_plan(args)
        return train(plan, args)
    except (options.UsageError, rundir.RunDirError) as exc:
        options.fail(str(exc))
    except KeyboardInterrupt:
        return 130


def train(plan: Plan, args) -> int:
    from trainer_hooks.trainer import tokens

    cache = Path(args.data_dir).resolve() if args.data_dir else tokens.default_cache_dir()
    token_file = tokens.build(cache, plan.preset.vocab_size)
    data = {"corpus": "python-stdlib", "token_file": str(token_file.path),
            "tokenizer": str(token_file.tokenizer_path), "tokens": len(token_file),
            "vocab_size": token_file.vocab_size, "workers": args.workers, "shuffle_seed": args.seed,
            "drop_remainder": True}
    probe = describe(plan, args, data, run_id="")
    previous = rundir.check(plan.run_dir, probe, args.resume, plan.rank, plan.world)
    run_id = previous["run"] if previous else launch_run_id(plan)
    config = describe(plan, args, data, run_id)
    if previous:
        config["resumed_from"] = previous.get("resumed_from", []) + [previous.get("argv")]
    if plan.rank == 0:
        rundir.write_config(plan.run_dir, config)
    work = plan.run_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    os.environ.setdefault("GLOG_v", "3")
    from trainer_hooks.trainer.session import Session

    return Session(plan, args, config, token_file).run()

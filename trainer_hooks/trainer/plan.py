"""One run's resolved settings (:class:`Plan`) and the optimizer constants the trainer uses.

Pure Python: resolving a plan imports no MindSpore, so a bad option costs no startup.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from trainer_hooks.trainer import options, rundir, schedule
from trainer_hooks.trainer.injection import LOW_LOSS_SCALE, LR_HIGH_FACTOR, VOCAB_SHORT_BY
from trainer_hooks.trainer.presets import PRESETS, Preset

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

    model_vocab: int = 0    # the model's embedding rows (vocab-mismatch: fewer than the tokenizer's)

    @property
    def model_preset(self) -> Preset:
        """The preset the model is built from (its vocabulary is ``model_vocab``)."""
        return replace(self.preset, vocab_size=self.model_vocab or self.preset.vocab_size)

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
    for block in inj.blocks():
        if block >= preset.num_layers:
            raise options.UsageError(f"--inject names decoder block {block}, but preset "
                                     f"{preset.name} has blocks 0..{preset.num_layers - 1}")
    steps = args.steps or preset.steps
    lr = (args.lr or preset.lr) * (LR_HIGH_FACTOR if inj.lr_high else 1.0)
    rank, world = _rank_world()
    run_dir = Path(args.run_dir) if args.run_dir else rundir.default_run_dir(preset.name)
    return Plan(preset, steps, precision, grad_accum, args.micro_batch or preset.micro_batch, lr,
                schedule.warmup_steps(steps), args.save_every or min(preset.save_every, steps),
                rank, world, run_dir.resolve(),
                grad_accum if inj.accum_mismatch else 1,
                args.hang_after_s or preset.hang_after_s or None,
                preset.vocab_size - (VOCAB_SHORT_BY if inj.vocab_mismatch else 0))


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

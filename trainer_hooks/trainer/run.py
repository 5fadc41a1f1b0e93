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
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from trainer_hooks.trainer import options, rundir
from trainer_hooks.trainer.plan import (  # noqa: F401
    ADAM_BETAS,
    CLIP_NORM,
    WEIGHT_DECAY,
    Plan,
    launch_run_id,
    loss_scale_of,
    make_plan,
    parallel_mode,
)
from trainer_hooks.trainer.presets import parameter_count


def describe(plan: Plan, args, data: Dict[str, Any], run_id: str) -> Dict[str, Any]:
    """The full run config: ``config.json`` and ``run_start.config``."""
    p = plan.model_preset
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
        "tokenizer_vocab_size": data.get("vocab_size"),
        **({"init_from": str(args.init_from), "loaded_weights": 1} if args.init_from else {}),
        "data": data, "checkpoint": {"every": plan.save_every, "keep": args.keep,
                                     "dir": str(plan.run_dir / "checkpoints")},
        "inject": args.injections.as_config(), "hooks": not args.no_hooks,
        "versions": _versions(), "argv": sys.argv[1:],
    }


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
    if os.environ.get("MS_ROLE") == "MS_SCHED":
        from trainer_hooks.trainer.model import host_msrun_cluster

        return host_msrun_cluster(args.device)
    try:
        plan = make_plan(args)
        if args.inject_rank is not None and args.inject_rank != plan.rank:
            args.inject = ""                       # the faults belong to another rank
            args.injections = options.parse_injections("")
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

"""Command-line options of the bundled trainer (standard library only).

``msdoctor train`` (which must not import MindSpore) and ``python -m trainer_hooks.trainer`` share
this parser. Bad values end in one line naming the value and the valid forms, exit status 2.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, NoReturn, Optional, Sequence

from trainer_hooks.trainer.injection import InjectionError, parse as parse_injections
from trainer_hooks.trainer.presets import PRESETS

PRECISIONS = ("fp32", "fp16", "bf16")
DEVICES = ("CPU", "GPU", "Ascend")


class UsageError(ValueError):
    """A bad command-line value (one line)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The trainer's options on ``parser``."""
    add = parser.add_argument
    add("--preset", default="tiny", metavar="NAME",
        help=f"model size: {', '.join(PRESETS)} (default tiny; the last three need NPUs/GPUs)")
    add("--steps", type=int, metavar="N", help="total optimizer steps (default: the preset's)")
    add("--stop-after", type=int, metavar="N",
        help="end this process after N steps (the schedule still spans --steps; for resume tests)")
    add("--run-dir", metavar="DIR", help="where the spool, config.json and checkpoints go "
        "(default runs/<preset>-<time>)")
    add("--seed", type=int, default=42, help="base seed; rank r uses seed + r (default 42)")
    add("--inject", default="", metavar="SPEC",
        help="comma-separated faults: nan@STEP, spike@STEP, periodic@K, stall@STEP, slow-data@MS, "
             "lr-high, loss-scale-low, leak[@MB], hang@STEP, accum-mismatch, grad-layer@STEP:L, "
             "nan-layer@STEP:L, frozen-layer:L, skip-load:L (with --init-from), vocab-mismatch, "
             "bad-data@STEP:N")
    add("--inject-rank", type=int, metavar="N",
        help="inject the faults on rank N only (default: every rank), as when one device goes bad")
    add("--no-hooks", action="store_true", help="train without msdoctor's callback")
    add("--resume", action="store_true", help="continue the run in --run-dir from its last checkpoint")
    add("--init-from", metavar="CKPT", help="start from the model weights of checkpoint file CKPT "
        "(a fresh optimizer and schedule, step 1; with --inject skip-load:L block L's keys are skipped)")
    add("--precision", metavar="P", help="fp32 | fp16 | bf16 (default: fp32 on CPU, else the preset's)")
    add("--grad-accum", type=int, metavar="K", help="micro-batches per optimizer step")
    add("--micro-batch", type=int, metavar="B", help="sequences per micro-batch")
    add("--lr", type=float, help="peak learning rate (default: the preset's)")
    add("--save-every", type=int, metavar="N", help="checkpoint every N steps")
    add("--keep", type=int, default=3, metavar="N", help="checkpoints kept (default 3)")
    add("--workers", type=int, default=2, metavar="N", help="data loader workers (default 2)")
    add("--device", default="CPU", metavar="TARGET", help="CPU | GPU | Ascend (default CPU)")
    add("--data-dir", metavar="DIR", help="tokenizer/token-file cache (default ~/.cache/msdoctor/data)")
    add("--log-every", type=int, default=10, metavar="N", help="print a progress line every N steps")
    add("--update-every", type=int, default=10, metavar="N",
        help="sample the relative weight update every N steps (default 10)")
    add("--hang-timeout", type=float, default=600.0, metavar="S",
        help="hang@STEP blocks at most S seconds (or until the stop file appears)")
    add("--hang-after-s", type=float, metavar="S",
        help="seconds without a step after which the doctor calls the run hung, declared in "
             "run_start.expect.hang_after_s (default: the preset's; tiny 60, small 180, else 900)")
    add("--heartbeat-s", type=float, default=10.0, metavar="S",
        help="seconds between the hooks' heartbeat events (default 10)")
    add("--expect-tokens-per-s", type=float, metavar="X",
        help="baseline tokens/s per device, passed to run_start.expect")


def fail(message: str, prog: str = "msdoctor train") -> NoReturn:
    """Print ``prog: error: message`` on one line and exit with status 2."""
    sys.stderr.write(f"{prog}: error: {message}\n")
    raise SystemExit(2)


def validate(args: argparse.Namespace) -> None:
    """Check values argparse cannot; raises :class:`UsageError` (one line)."""
    if args.preset not in PRESETS:
        raise UsageError(f"unknown preset {args.preset!r}; valid presets: {', '.join(PRESETS)}")
    try:
        args.injections = parse_injections(args.inject)
    except InjectionError as exc:
        raise UsageError(str(exc)) from None
    if args.precision is not None and args.precision not in PRECISIONS:
        raise UsageError(f"unknown precision {args.precision!r}; valid: {', '.join(PRECISIONS)}")
    if args.device not in DEVICES:
        raise UsageError(f"unknown device {args.device!r}; valid: {', '.join(DEVICES)}")
    for name in ("steps", "stop_after", "grad_accum", "micro_batch", "save_every", "workers", "log_every",
                 "update_every"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if args.injections.skip_load is not None and not args.init_from:
        raise UsageError("--inject skip-load:L needs --init-from CKPT (the keys skipped at loading)")
    if args.injections.load_nothing and not args.init_from:
        raise UsageError("--inject load-nothing needs --init-from CKPT (the checkpoint not loaded)")
    if args.init_from and args.resume:
        raise UsageError("--init-from and --resume exclude each other (weights only vs the whole run)")
    if args.keep < 1:
        raise UsageError(f"--keep must be a positive integer, got {args.keep}")
    if args.lr is not None and not args.lr > 0:
        raise UsageError(f"--lr must be a positive number, got {args.lr}")
    if args.heartbeat_s <= 0:
        raise UsageError(f"--heartbeat-s must be positive seconds, got {args.heartbeat_s}")
    if args.hang_after_s is not None and not args.hang_after_s > 0:
        raise UsageError(f"--hang-after-s must be positive seconds, got {args.hang_after_s}")
    if args.hang_timeout <= 0:
        raise UsageError(f"--hang-timeout must be positive seconds, got {args.hang_timeout}")


def parse(argv: Optional[Sequence[str]] = None, prog: str = "msdoctor train") -> argparse.Namespace:
    """Parse and validate ``argv``; exits with status 2 and one line on a bad value."""
    parser = argparse.ArgumentParser(prog=prog, description="The bundled MindSpore LLM trainer.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        validate(args)
    except UsageError as exc:
        fail(str(exc), prog)
    return args


def to_argv(args: argparse.Namespace) -> List[str]:
    """The command line that reproduces ``args`` (for running the trainer as a subprocess)."""
    argv: List[str] = []
    probe = argparse.ArgumentParser(add_help=False)
    add_arguments(probe)
    for action in probe._actions:
        value = getattr(args, action.dest, None)
        flag = action.option_strings[0]
        if isinstance(action, argparse._StoreTrueAction):
            if value:
                argv.append(flag)
        elif value is not None and value != action.default:
            argv += [flag, str(value)]
    return argv

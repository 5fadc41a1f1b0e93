"""``msdoctor train``: the bundled MindSpore LLM trainer, run as its own process.

The msdoctor process never imports MindSpore: options are parsed and checked here (bad values end
in one line and exit status 2 before anything starts), then ``python -m trainer_hooks.trainer``
runs with the same options and its exit status is returned.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

from trainer_hooks.trainer import options

HELP = "train the bundled LLM (MindFormers Llama) with the hooks on; --inject reproduces faults"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser)


def command(args: argparse.Namespace) -> list:
    """The trainer's command line for ``args``."""
    return [sys.executable, "-m", "trainer_hooks.trainer", *options.to_argv(args)]


def run(args: argparse.Namespace) -> int:
    try:
        options.validate(args)
    except options.UsageError as exc:
        options.fail(str(exc))
    try:
        return subprocess.call(command(args))
    except KeyboardInterrupt:
        return 130

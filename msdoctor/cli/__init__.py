"""The ``msdoctor`` command line: one module per subcommand under :mod:`msdoctor.cli`.

Each command module exposes ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. Modules are imported only when their command runs, so
``msdoctor status`` never pays for Textual or MindSpore.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from typing import List, Optional

from msdoctor.wire.errors import MsdoctorError


class UsageError(MsdoctorError, ValueError):
    """Command-line arguments that cannot work together or name something that is not there."""

#: command name -> module under msdoctor.cli
COMMANDS = {
    "serve": "serve",
    "status": "status",
    "rules": "rules",
    "replay": "replay",
    "report": "report",
    "tui": "tui",
    "train": "train",
    "demo": "demo",
    "completion": "completion",
    "preflight": "preflight",
}


def _available() -> dict:
    found = {}
    for name, module in COMMANDS.items():
        spec = importlib.util.find_spec(f"msdoctor.cli.{module}")
        if spec is not None:
            found[name] = module
    return found


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, that one command's (the others' modules are
    not imported: ``msdoctor replay`` does not pay for the sidecar's imports)."""
    from msdoctor import __version__

    parser = argparse.ArgumentParser(
        prog="msdoctor",
        description="A training doctor for MindSpore / MindFormers LLM jobs.")
    parser.add_argument("--version", action="version", version=f"msdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = {only: COMMANDS[only]} if only in COMMANDS else _available()
    for name, module_name in commands.items():
        module = importlib.import_module(f"msdoctor.cli.{module_name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP,
                                 epilog=getattr(module, "EPILOG", None))
        module.add_arguments(command)
        command.set_defaults(_run=module.run, _parser=command)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    from msdoctor.cli.options import settle_run_dir

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    settle_run_dir(args._parser, args)
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:          # the reader went away (``| head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())

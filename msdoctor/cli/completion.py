"""``msdoctor completion bash|zsh|tcsh``: print a shell completion script (made by shtab)."""
from __future__ import annotations

import argparse
import sys

HELP = "Print a shell completion script, e.g. `msdoctor completion bash > ~/.msdoctor-complete`."
SHELLS = ("bash", "zsh", "tcsh")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"{HELP} Load it with `source <(msdoctor completion bash)` (bash), or write it as "
        "`_msdoctor` into a directory on $fpath (zsh).")
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def run(args: argparse.Namespace) -> int:
    try:
        import shtab
    except ImportError:
        print("msdoctor completion: the 'shtab' package is not installed "
              "(pip install shtab)", file=sys.stderr)
        return 2
    from msdoctor.cli import build_parser

    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0

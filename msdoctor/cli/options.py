"""Options several commands share: the run directory (positional, ``--run-dir`` an alias),
the rule files (``--rules`` adds to the shipped set, ``--no-default-rules`` replaces it),
and colour on a terminal."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import IO, List, Optional

from msdoctor.wire.layout import EXPECTED_RUN_DIR

#: What shtab completes a directory argument with, per shell (``shtab.DIRECTORY``).
DIRECTORY = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/", "tcsh": "d"}
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def add_run_dir(parser: argparse.ArgumentParser, required: bool = True,
                help: str = f"the run directory: {EXPECTED_RUN_DIR}") -> None:
    """``RUN_DIR`` as a positional argument, with ``--run-dir DIR`` kept as an alias."""
    for action in (
            parser.add_argument("run_dir", nargs="?", type=Path, metavar="RUN_DIR", help=help),
            parser.add_argument("--run-dir", dest="run_dir_option", type=Path, metavar="DIR",
                                help="the same as RUN_DIR")):
        action.complete = DIRECTORY    # type: ignore[attr-defined]   # shell completion
    parser.set_defaults(_run_dir_required=required)


def settle_run_dir(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Merge ``--run-dir`` into ``args.run_dir``; a usage error when both differ or none is given."""
    if not hasattr(args, "run_dir_option"):
        return
    option = args.run_dir_option
    if option is not None:
        if args.run_dir is not None and args.run_dir != option:
            parser.error(f"two run directories given ({args.run_dir} and --run-dir {option}); "
                         "expected one")
        args.run_dir = option
    if args.run_dir is None and args._run_dir_required:
        parser.error(f"expected a run directory: {parser.prog} RUN_DIR (or --run-dir DIR)")


def add_rules(parser: argparse.ArgumentParser) -> None:
    """``--rules PATH`` (repeatable, added to the shipped rules) and ``--no-default-rules``."""
    parser.add_argument("--rules", action="append", default=[], metavar="PATH", type=str,
                        help="a rule file or directory, used in addition to the shipped rules "
                             "(repeatable)")
    parser.add_argument("--no-default-rules", action="store_true",
                        help="use only the --rules given, not the shipped rules")


def rule_paths(args: argparse.Namespace) -> List[str]:
    """The rule paths the arguments ask for (each once); ``ValueError`` saying what is missing."""
    from msdoctor.core.engine.loader import default_rules_dir

    given = [str(p) for p in (args.rules or [])]
    for path in given:
        if not Path(path).exists():
            raise ValueError(f"--rules {path}: no such file or directory; expected a rule file "
                             "(*.yaml) or a directory of them")
    if getattr(args, "no_default_rules", False):
        if not given:
            raise ValueError("--no-default-rules: expected at least one --rules PATH")
        paths = given
    else:
        paths = [str(default_rules_dir())] + given
    seen, unique = set(), []
    for path in paths:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique


def colour_on(stream: Optional[IO[str]] = None) -> bool:
    """Colour only on a terminal, and never with ``NO_COLOR`` set (https://no-color.org)."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def paint(text: str, style: Optional[str], on: bool) -> str:
    """``text`` in ``style`` (a rich style such as ``bold red``) when ``on``, else as is."""
    if not on or not style:
        return text
    from rich.style import Style

    return Style.parse(style).render(text)


def severity(text: str, level: Optional[str], on: bool) -> str:
    """``text`` coloured by an alert severity (critical red, warning yellow, info cyan)."""
    return paint(text, SEVERITY_STYLE.get(str(level)), on)

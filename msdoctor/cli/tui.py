"""``msdoctor tui [URL] | --run-dir DIR``: the terminal UI over a sidecar or a run directory."""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from msdoctor.cli import UsageError
from msdoctor.cli.options import add_rules, rule_paths
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.layout import DEFAULT_URL, TOKEN_ENV

HELP = "Open the terminal UI: every rank's health, the curves, and the alerts with their fixes."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"{HELP} Attaches to a running sidecar (msdoctor serve) at URL (default {DEFAULT_URL}), "
        "or, given a run directory, reads it itself and runs the rules in-process (no "
        "sidecar needed; works on a finished run too).")
    parser.add_argument("url", nargs="?", metavar="URL|RUN_DIR",
                        help=f"sidecar address (default: {DEFAULT_URL}), or a run directory")
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="read this run directory in-process instead of a sidecar")
    add_rules(parser)
    parser.add_argument("--token", metavar="TOKEN", default=None,
                        help=f"bearer token for the sidecar's /api (default: ${TOKEN_ENV})")
    parser.add_argument("--refresh", type=float, default=1.0, metavar="S",
                        help="seconds between refreshes (default: 1; at least 0.25)")


def build_source(args: argparse.Namespace):
    """The data source the arguments ask for; :class:`UsageError` naming the problem."""
    from msdoctor.tui.source import EmbeddedSource, HttpSource

    if args.url and args.run_dir is None and not _looks_like_url(args.url):
        args.run_dir, args.url = Path(args.url), None
    if args.run_dir is not None and args.url:
        raise UsageError("give either URL or --run-dir, not both")
    if args.refresh <= 0:
        raise UsageError(f"--refresh {args.refresh}: expected a number of seconds > 0")
    if args.run_dir is not None:
        if not args.run_dir.is_dir():
            raise UsageError(f"--run-dir {str(args.run_dir)!r}: no such directory; expected a run "
                             "directory (events/rank-<N>.jsonl inside, or to appear)")
        try:
            paths = rule_paths(args)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return EmbeddedSource(args.run_dir, rules=paths)
    if args.rules or args.no_default_rules:
        raise UsageError("--rules needs a run directory (a sidecar uses its own rules)")
    return HttpSource(args.url or DEFAULT_URL, token=args.token or os.environ.get(
        TOKEN_ENV) or None)


def _looks_like_url(text: str) -> bool:
    """``http(s)://...`` or ``host:port``, unless a directory of that name exists."""
    if "://" in text:
        return True
    return not Path(text).exists() and re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+:\d+", text) is not None


def run(args: argparse.Namespace) -> int:
    from msdoctor.core.engine.errors import RuleSetError

    try:
        source = build_source(args)
    except RuleSetError as exc:         # every error, each with file:line:col
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"msdoctor tui: the rule set has {len(exc.errors)} error(s)", file=sys.stderr)
        return 2
    except (MsdoctorError, OSError, ValueError) as exc:   # ValueError: a malformed sidecar URL
        print(f"msdoctor tui: {exc}", file=sys.stderr)
        return 2
    from msdoctor.tui.app import DoctorApp

    try:
        DoctorApp(source, refresh_s=args.refresh).run()
    finally:
        source.close()
    return 0

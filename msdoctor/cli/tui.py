"""``msdoctor tui [URL] | --run-dir DIR``: the terminal UI over a sidecar or a run directory."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from msdoctor.wire.layout import DEFAULT_URL

HELP = "Open the terminal UI: every rank's health, the curves, and the alerts with their fixes."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"{HELP} Attaches to a running sidecar (msdoctor serve) at URL (default {DEFAULT_URL}), "
        "or, with --run-dir, reads a run directory itself and runs the rules in-process (no "
        "sidecar needed; works on a finished run too).")
    parser.add_argument("url", nargs="?", metavar="URL",
                        help=f"sidecar address (default: {DEFAULT_URL})")
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="read this run directory in-process instead of a sidecar")
    parser.add_argument("--rules", action="append", default=[], metavar="PATH",
                        help="with --run-dir: rule file or directory (repeatable; default: the "
                             "shipped rules)")
    parser.add_argument("--token", metavar="TOKEN", default=None,
                        help="bearer token for the sidecar's /api (default: $MSDOCTOR_API_TOKEN)")
    parser.add_argument("--refresh", type=float, default=1.0, metavar="S",
                        help="seconds between refreshes (default: 1; at least 0.25)")


def build_source(args: argparse.Namespace):
    """The data source the arguments ask for; ValueError naming the problem."""
    from msdoctor.tui.source import EmbeddedSource, HttpSource

    if args.run_dir is not None and args.url:
        raise ValueError("give either URL or --run-dir, not both")
    if args.refresh <= 0:
        raise ValueError(f"--refresh {args.refresh}: expected a number of seconds > 0")
    if args.run_dir is not None:
        if not args.run_dir.is_dir():
            raise ValueError(f"--run-dir {str(args.run_dir)!r}: no such directory; expected a run "
                             "directory (events/rank-<N>.jsonl inside, or to appear)")
        return EmbeddedSource(args.run_dir, rules=args.rules)
    if args.rules:
        raise ValueError("--rules needs --run-dir (a sidecar uses its own rules)")
    return HttpSource(args.url or DEFAULT_URL, token=args.token or os.environ.get(
        "MSDOCTOR_API_TOKEN") or None)


def run(args: argparse.Namespace) -> int:
    try:
        source = build_source(args)
    except ValueError as exc:
        print(f"msdoctor tui: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # RuleSetError: every error with file:line
        errors = getattr(exc, "errors", None)
        if errors is None:
            raise
        for error in errors:
            print(error, file=sys.stderr)
        print(f"msdoctor tui: the rule set has {len(errors)} error(s)", file=sys.stderr)
        return 2
    from msdoctor.tui.app import DoctorApp

    try:
        DoctorApp(source, refresh_s=args.refresh).run()
    finally:
        source.close()
    return 0

"""``msdoctor report RUN_OR_LOG -o report.html``: the run's curves and alerts on one page."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "Write an HTML report (charts and alerts with fixes) of a run directory or training logs."
EPILOG = ("exit status: 0 the report was written, 1 the rule set has errors, 2 bad input (a "
          "missing or unreadable file, a log in a layout msdoctor does not read, a directory "
          "with no logs, an output name not ending in .html)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from msdoctor.cli.options import add_rules
    from msdoctor.cli.replay import add_input_arguments as add_log_arguments

    parser.add_argument("paths", metavar="PATH", nargs="+",
                        help="a run directory (events/rank-N.jsonl), or log files / directories")
    parser.add_argument("-o", "--output", metavar="FILE", default="report.html",
                        help="output file: .html (self-contained; default report.html)")
    add_rules(parser)
    parser.add_argument("--title", help="page title (default: the input's name)")
    parser.add_argument("--x-axis", choices=("step", "time"), default="step",
                        help="the charts' x axis: the step (default), or the wall clock (a hang "
                             "or a slow phase shows as a gap or a stretch)")
    add_log_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from msdoctor.cli.options import rule_paths
    from msdoctor.core.engine.errors import RuleSetError
    from msdoctor.core.engine.loader import load_rules
    from msdoctor.replay.driver import replay_paths
    from msdoctor.replay.formats import FormatError
    from msdoctor.report.curves import CurveCollector
    from msdoctor.report.page import render_page

    out = Path(args.output)
    if out.suffix.lower() == ".png":
        print(f"msdoctor report: {out}: PNG output is not supported; write .html instead "
              "(self-contained, opens in any browser)", file=sys.stderr)
        return 2
    if out.suffix.lower() not in (".html", ".htm"):
        print(f"msdoctor report: {out}: expected a .html file name", file=sys.stderr)
        return 2
    try:
        rules = load_rules(rule_paths(args))
        series = CurveCollector()
        result = replay_paths(args.paths, rules, args.format, args.rank, args.run, args.seq_length,
                              args.progress, observe=series.observe)
    except RuleSetError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        return 1
    except (FormatError, OSError, ValueError) as exc:
        print(f"msdoctor report: {exc}", file=sys.stderr)
        return 2
    title = args.title or Path(args.paths[0]).resolve().name
    out.write_text(render_page(result, series, title, x_time=args.x_axis == "time"),
                   encoding="utf-8")
    s = result["summary"]
    print(f"{out}: {s['steps']:,} steps, {s['ranks']} rank(s), {s['firing']} alert(s)")
    return 0

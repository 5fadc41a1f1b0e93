"""``msdoctor rules check|test|list``: validate rule files, run their unit tests, list them."""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import List

from msdoctor.cli.options import add_rules, colour_on, paint, rule_paths, severity as severity_style

HELP = "Check, test and list alerting rule files."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rules_command", metavar="{check,test,list}")
    check = sub.add_parser("check", help="validate rule files; print every error as file:line:col")
    check.add_argument("paths", nargs="*", metavar="PATH",
                       help="rule files or directories (default: the shipped rules/)")
    test = sub.add_parser("test", help="run promtool-style rule unit tests")
    test.add_argument("paths", nargs="*", metavar="PATH",
                      help="test files or directories; a rule directory's tests/ is found "
                           "(default: the shipped rules/tests/)")
    test.add_argument("-v", "--verbose", action="store_true", help="also print passing tests")
    lst = sub.add_parser("list", help="show each rule's name, severity and summary")
    add_rules(lst)


def run(args: argparse.Namespace) -> int:
    command = getattr(args, "rules_command", None)
    if command == "check":
        return _check(args.paths)
    if command == "test":
        return _test(args.paths, args.verbose)
    if command == "list":
        return _list(args)
    print("usage: msdoctor rules {check,test,list} ...", file=sys.stderr)
    return 2


def _check(paths: List[str]) -> int:
    from msdoctor.core.engine.loader import check_rules, default_rules_dir, rule_files

    targets = paths or [str(default_rules_dir())]
    missing = [p for p in targets if not Path(p).exists()]
    for p in missing:
        print(f"{p}: no such file or directory", file=sys.stderr)
    files = rule_files([p for p in targets if Path(p).exists()])
    if not files and not missing:
        print(f"no rule files (*.yaml) in {', '.join(targets)}", file=sys.stderr)
        return 1
    ruleset, errors = check_rules(files)
    for error in errors:
        print(error, file=sys.stderr)
    if errors or missing:
        print(f"{len(errors)} error{'s' if len(errors) != 1 else ''} in {len(files)} file"
              f"{'s' if len(files) != 1 else ''}", file=sys.stderr)
        return 1
    print(f"ok: {len(ruleset)} rules in {len(files)} file{'s' if len(files) != 1 else ''}")
    return 0


def _test(paths: List[str], verbose: bool) -> int:
    from msdoctor.core.engine.loader import default_rules_dir
    from msdoctor.core.engine.ruletest import run_test_file

    files: List[Path] = []
    for p in paths or [str(default_rules_dir() / "tests")]:
        path = Path(p)
        if path.is_dir() and (path / "tests").is_dir():     # a rule directory: its unit tests
            path = path / "tests"
        if path.is_dir():
            files.extend(sorted(list(path.glob("*.yaml")) + list(path.glob("*.yml"))))
        elif path.exists():
            files.append(path)
        else:
            print(f"{p}: no such file or directory", file=sys.stderr)
            return 1
    if not files:
        print("no rule test files found", file=sys.stderr)
        return 1
    passed = failed = 0
    started = time.perf_counter()
    for path in files:
        for result in run_test_file(path):
            if result.passed:
                passed += 1
                if verbose:
                    print(f"PASS {path}: {result.name}")
            else:
                failed += 1
                print(f"FAIL {path}: {result.name}")
                for failure in result.failures:
                    print("  " + failure.replace("\n", "\n  "))
    took = time.perf_counter() - started
    print(f"{passed} passed, {failed} failed in {took:.2f}s")
    return 1 if failed else 0


def readable(template: str) -> str:
    """A template with each ``{{ ... }}`` shown as the name of what fills it, e.g. ``<rank>``."""
    def name(match: "re.Match[str]") -> str:
        found = re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?",
                           match.group(1))
        if not found:
            return "<...>"
        base, field = found[0]
        return f"<{field or base}>"

    return re.sub(r"\{\{(.*?)\}\}", name, template)


def _list(args: argparse.Namespace) -> int:
    from msdoctor.core.engine.errors import RuleSetError
    from msdoctor.core.engine.loader import load_rules

    try:
        ruleset = load_rules(rule_paths(args))
    except RuleSetError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"msdoctor rules list: {exc}", file=sys.stderr)
        return 2
    colour = colour_on()
    rows = [(r.alert, r.severity, readable(r.annotations.get("summary", ""))) for r in ruleset]
    causes = {r.alert: r.consequence_of for r in ruleset if r.consequence_of}
    if not rows:
        print("no rules")
        return 0
    w1 = max(len(r[0]) for r in rows)
    w2 = max(len("SEVERITY"), max(len(r[1]) for r in rows))
    print(f"{'ALERT':<{w1}}  {'SEVERITY':<{w2}}  SUMMARY")
    for name, level, summary in rows:
        print(f"{paint(f'{name:<{w1}}', 'bold', colour)}  "
              f"{severity_style(f'{level:<{w2}}', level, colour)}  {summary}")
        if name in causes:
            print(f"{'':<{w1}}  {'':<{w2}}  ↳ a consequence of {', '.join(causes[name])}: not "
                  "notified while one of them fires on the same rank")
    return 0

"""Compare the benchmarks of two source trees side by side, in one run (issue 12's gate).

Every benchmark under ``tests/bench/`` is run alternately against the old tree and the new
one (each tree's OWN copy of the bench, with ``PYTHONPATH=<tree>`` so that tree's ``msdoctor``
wins), for ``--rounds`` rounds; the figures are pulled out of each run's stdout with regular
expressions and the medians compared. Pairs are adjacent in time and their order flips every
round (old-new, new-old, ...), so drifts of a shared machine's load hit both sides alike.

    .venv/bin/python scripts/bench_compare.py [--old /work/wt/base] [--new .] [--rounds 2]
        [--quick] [--only engine,replay] [--with-trainer] [--keep-logs DIR] [--list]
    .venv/bin/python scripts/bench_compare.py --from-logs DIR   # re-read a --keep-logs run

What is run and read is the table ``BENCHES`` below (``--list`` prints it): per bench the
arguments of a ``--quick`` smoke run and of the full run (the gate), and the figures. A full
run takes far longer than a quick one (one quick round: ~25 min on 2 busy cores, mostly tui,
callback and degraded); bench_trainer_overhead (trains MindSpore for minutes) only runs with
``--with-trainer``. On a loaded machine use ``--rounds 3`` or more and read the CPU-time
figures before the wall-time ones.

Verdicts: ``ok`` (new as good or better), ``within noise`` (worse by <= 5 %), ``WORSE by x %``;
detection-quality figures must be ``identical``. Exit status: 0 if all is well, 1 if a figure
is worse by more than 5 % or differs, 2 if a bench failed or a figure was not found. A bench
that fails is reported with the end of its stderr.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

THRESHOLD = 5.0                     # per cent
NUM = r"[\d,]+(?:\.\d+)?"         # a figure as printed: 1,234,567 or 12.5
Rows = List[Tuple[str, ...]]
MARK = {"higher": " (+)", "lower": " (-)", "same": " (=)", "info": " (i)"}


@dataclass(frozen=True)
class Figure:
    """A figure of a bench's stdout: ``pattern`` (multiline) captures it in group ``group``;
    a ``key`` group, if any, names one figure per match (``{key}`` in ``name``).
    ``better``: "higher", "lower", "same" (must be identical, compared as text) or "info"
    (compared as text and shown, never fails: a known, intended change of behaviour)."""

    name: str
    pattern: str
    better: str
    group: str = "value"


@dataclass(frozen=True)
class Bench:
    name: str
    quick: Tuple[str, ...]
    full: Tuple[str, ...]
    figures: Tuple[Figure, ...]
    timeout: float = 1800.0
    optional: bool = False           # only with --with-trainer (or named in --only)


def hi(name: str, pattern: str, group: str = "value") -> Figure:
    return Figure(name, pattern, "higher", group)


def lo(name: str, pattern: str, group: str = "value") -> Figure:
    return Figure(name, pattern, "lower", group)


def same(name: str, pattern: str, group: str = "value") -> Figure:
    return Figure(name, pattern, "same", group)


def info(name: str, pattern: str, group: str = "value") -> Figure:
    return Figure(name, pattern, "info", group)


TUI_CASE = r"^(?P<key>\S.*?)(?: \(no new steps\))?\s+wall: fetch"
DETECTION_ROW = (r"^(?P<key>[A-Z]\w+)\s+(?P<runs>\d+)\s+(?P<recall>\S+)\s+(?P<false>\S+)\s+"
                 r"(?P<median>\S+)(?: s)?\s+(?P<max>\S+)")
DEGRADED_CASE = r"^(?P<key>no hooks|hooks[^\n]*?)\s+(?P<rate>[\d.]+) steps/s[^\n]*\n"

BENCHES: Tuple[Bench, ...] = (
    Bench("engine", ("--quick",), ("--ranks", "1", "--steps", "200000"), (
        hi("ingest k events/s", rf"^ingest: tail \+ decode \+ columnize\s+(?P<value>{NUM})k"),
        hi("engine alone k events/s", rf"^engine evaluate \(\s*\d+ rules\)\s+(?P<value>{NUM})k"),
        hi("replay end-to-end k events/s",
           rf"^replay: decode\+columnize\+evaluate\s+(?P<value>{NUM})k"),
        lo("replay time / bare orjson time", rf"\(= (?P<value>{NUM})x its time\)"),
        # replay of a spool is judged as of now since the refactor (docs/architecture.md):
        # the bench's never-ended synthetic run gets JobHung, where 763d6fa said nothing
        info("replay alerts", r"^alerts: (?P<value>.*?); load average"),
        lo("engine peak traced MiB, {key} steps",
           rf"^memory:\s+(?P<key>\d+) steps -> engine peak traced\s+(?P<value>{NUM}) MiB"),
        lo("snapshot state MiB, {key} steps",
           rf"^memory:\s+(?P<key>\d+) steps -> .*snapshot state\s+(?P<value>{NUM}) MiB"),
    ), timeout=1200),
    Bench("replay", ("--steps", "10000", "--repeats", "2"), (), (
        hi("parse only lines/s", rf"parse only\s+: median\s+(?P<value>{NUM}) lines/s"),
        hi("parse + evaluate lines/s", rf"parse \+ evaluate\s+: median\s+(?P<value>{NUM}) lines/s"),
    )),
    Bench("ingest", ("--ranks", "2", "--steps", "10000"), (), (
        hi("ingest lines/s",
           rf"^ingest \(tail\+decode\+columnize\+apply\)\s+(?P<value>{NUM}) lines/s"),
        lo("snapshot MiB", rf"^snapshot: (?P<value>{NUM}) MiB"),
        lo("snapshot save ms", rf"^snapshot: .*saved in (?P<value>{NUM}) ms"),
        lo("snapshot load ms", rf"^snapshot: .*loaded in (?P<value>{NUM}) ms"),
        lo("peak RSS MiB after ingest", rf"^peak RSS: (?P<value>{NUM}) MiB after ingest"),
    )),
    Bench("metrics", ("--ranks", "1024", "--steps", "5", "--repeat", "5"), ("--ranks", "1024"), (
        lo("/metrics 1024 ranks, median ms", rf"msdoctor renderer: median (?P<value>{NUM}) ms"),
        lo("/metrics 1024 ranks, cold ms", rf"cold label cache: (?P<value>{NUM}) ms"),
    )),
    Bench("tui", ("--ranks", "1024", "--steps", "10", "--refreshes", "3"), ("--ranks", "1024"), (
        lo("slowest HTTP refresh (1024 ranks) wall ms",
           rf"^slowest HTTP refresh \(median wall\): (?P<value>{NUM}) ms"),
        lo("{key}: wall ms", TUI_CASE + rf".*?=\s+(?P<value>{NUM}) ms"),
        lo("{key}: CPU ms", TUI_CASE + rf".*CPU\s+(?P<value>{NUM}) ms"),
        lo("initial ingest with the rules s",
           rf"^\d+ ranks x \d+ steps ingested with the rules in (?P<value>{NUM}) s"),
        lo("sidecar ingest of 1 step x 1024 ranks ms",
           rf"between refreshes: median (?P<value>{NUM}) ms"),
    ), timeout=1200),
    Bench("callback", ("--quick",), (), (
        lo("[{key}] driven hooks thread CPU us/step",
           rf"^\[(?P<key>[^\]]+)\] hooks driven .* (?P<value>{NUM}) us/step thread CPU"),
        lo("[{key}] own hook cost wall us/step",
           rf"^\[(?P<key>[^\]]+)\] step .*own hook cost (?P<value>{NUM}) us/step wall"),
        lo("[{key}] own hook cost thread CPU us/step",
           rf"^\[(?P<key>[^\]]+)\] step .* (?P<value>{NUM}) us/step thread CPU ="),
        hi("[{key}] steps/s ratio with/without",
           rf"^\[(?P<key>[^\]]+)\] steps/s .*ratio with/without (?P<value>{NUM})"),
    ), timeout=2400),
    Bench("degraded", ("--rounds", "2", "--steps", "5"), (), (
        hi("{key}: steps/s", DEGRADED_CASE, "rate"),
        lo("{key}: CPU ms/step", DEGRADED_CASE + rf".*\(median (?P<value>{NUM}) ms CPU/step\)"),
        same("{key}: events", r"^(?P<key>hooks[^\n]*?)\s+[\d.]+ steps/s.*  events (?P<value>.*)$"),
    ), timeout=2400),
    Bench("soak", ("--only", "fleet", "--ranks", "128", "--steps", "1000"),
          ("--only", "fleet", "--ranks", "1024", "--steps", "2000"), (
        hi("fleet drain events/s wall", rf"^fleet: drained .* (?P<value>{NUM}) events/s wall"),
        hi("fleet drain events/s CPU", rf"^fleet: drained .* (?P<value>{NUM}) events/s CPU"),
        lo("fleet RSS after drain MiB", rf"^fleet: drained .*; RSS (?P<value>{NUM}) MiB"),
        lo("live poll ms, {key} new step(s)/rank",
           rf"^fleet live: \d+ ranks x (?P<key>\d+) new step.*one poll takes (?P<value>{NUM}) ms"),
        lo("/metrics render ms", rf"^fleet: /metrics .* rendered in (?P<value>{NUM}) ms"),
        lo("snapshot write s", rf"^fleet: snapshot .* written in (?P<value>{NUM}) s"),
        lo("restart load s", rf"^fleet: a restarted sidecar loads it in (?P<value>{NUM}) s"),
        lo("peak RSS MiB", rf"^fleet: a restarted .*peak RSS (?P<value>{NUM}) MiB"),
    ), timeout=2400),
    Bench("detection", ("--per-type", "2", "--seeds", "test"), (), (
        same("{key} runs", DETECTION_ROW, "runs"),
        same("{key} recall", DETECTION_ROW, "recall"),
        same("{key} false/10k", DETECTION_ROW, "false"),
        same("{key} median delay", DETECTION_ROW, "median"),
        same("{key} max delay", DETECTION_ROW, "max"),
        same("LossSpikesPeriodic share within 3 periods", r"\((?P<value>\d+%) within 3 periods"),
        same("LossSpikesPeriodic max delay periods", rf"within 3 periods, max (?P<value>{NUM})\)"),
        same("false alerts per 10k healthy steps",
             rf"false alerts: \d+ = (?P<value>{NUM}) per 10k"),
        same("before-injection false/10k", rf"false alerts there: (?P<value>{NUM}) per 10k"),
        same("targets", r"^targets: (?P<value>.*)$"),
        hi("engine replay events/s",
           rf"^replay: \d+ step events in .* = (?P<value>{NUM}) events/s"),
    ), timeout=3600),
    Bench("trainer_overhead", ("--rounds", "2", "--steps", "20"), (), (
        hi("{key}: steps/s",
           r"^\s+(?P<key>msdoctor hooks|no hooks|LossMonitor\+TimeMonitor)\s+"
           rf"(?P<value>{NUM}) steps/s"),
        lo("hooks' own time us/step", rf"own time inside training: (?P<value>{NUM}) us per step"),
    ), timeout=3600, optional=True),
)


@dataclass
class Run:
    """One run of one bench in one tree: its figures (name -> text), or why it failed."""

    figures: Dict[str, Tuple[Figure, str]] = field(default_factory=dict)
    error: Optional[str] = None


def extract(text: str, figures: Sequence[Figure]) -> Dict[str, Tuple[Figure, str]]:
    """Figure name -> (its spec, captured text); a name seen twice (e.g. two seed sets) gets
    `` #2``."""
    out: Dict[str, Tuple[Figure, str]] = {}
    for fig in figures:
        for match in re.finditer(fig.pattern, text, re.MULTILINE):
            value, key = match.group(fig.group), match.groupdict().get("key")
            if value is None:
                continue
            name = fig.name.format(key=key) if key is not None else fig.name
            if key is None and name in out:
                break                           # a plain figure: its first occurrence
            unique, n = name, 1
            while unique in out:
                n += 1
                unique = f"{name} #{n}"
            out[unique] = (fig, value.strip())
    return out


def run_bench(bench: Bench, tree: Path, python: str, quick: bool,
              keep: Optional[Path], label: str) -> Run:
    args = bench.quick if quick else bench.full
    cmd = [python, f"tests/bench/bench_{bench.name}.py", *args]
    env = dict(os.environ, PYTHONPATH=str(tree))
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=bench.timeout)
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = (exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or "")
        stderr += f"\n(timed out after {bench.timeout:.0f} s)"
        code = -1
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"bench_{bench.name}.{label}.out").write_text(
            f"# cd {tree} && PYTHONPATH={tree} {' '.join(cmd)}\n# exit {code}\n{stdout}")
        (keep / f"bench_{bench.name}.{label}.err").write_text(stderr)
    return outcome(bench, stdout, stderr, code)


def outcome(bench: Bench, stdout: str, stderr: str, code: int) -> Run:
    if code != 0:
        tail = "\n    ".join(stderr.strip().splitlines()[-8:])
        return Run(error=f"exit {code}; stderr ends:\n    {tail}")
    return Run(figures=extract(stdout, bench.figures))


def from_logs(bench: Bench, side: str, logs: Path) -> List[Run]:
    """The runs that ``--keep-logs`` wrote for ``bench`` in ``side``, read back."""
    runs = []
    for out in sorted(logs.glob(f"bench_{bench.name}.{side}.r*.out")):
        _, exit_line, stdout = out.read_text().split("\n", 2)
        stderr = out.with_suffix(".err").read_text()
        runs.append(outcome(bench, stdout, stderr, int(exit_line.removeprefix("# exit "))))
    return runs


def number(text: str) -> float:
    return float(text.replace(",", ""))


def fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def compare(fig: Figure, old: List[str], new: List[str]) -> Tuple[str, str, str, str, bool]:
    """(old, new, ratio, verdict, bad) for one figure's values over the rounds."""
    if not old or not new:
        side = "old" if not old else "new"
        return ("/".join(old) or "-", "/".join(new) or "-", "-", f"NOT FOUND in {side}", True)
    if fig.better in ("same", "info"):
        ok = set(old) == set(new) and len(set(old)) == 1
        shown = ["/".join(sorted(set(v))) for v in (old, new)]
        if fig.better == "info":
            return shown[0], shown[1], "-", "identical" if ok else "differs (not gated)", False
        return shown[0], shown[1], "-", "identical" if ok else "DIFFERS", not ok
    try:
        o, n = statistics.median(map(number, old)), statistics.median(map(number, new))
    except ValueError:
        return "/".join(old), "/".join(new), "-", "NOT A NUMBER", True
    ratio = n / o if o else (1.0 if n == 0 else float("inf"))
    worse = (1.0 - ratio) * 100 if fig.better == "higher" else (ratio - 1.0) * 100
    if worse > THRESHOLD:
        verdict, bad = f"WORSE by {worse:.1f} %", True
    elif worse > 0:
        verdict, bad = "within noise", False
    else:
        verdict = f"ok (better by {-worse:.1f} %)" if -worse > THRESHOLD else "ok"
        bad = False
    return fmt(o), fmt(n), f"{ratio:.3f}", verdict, bad


def table(rows: Rows) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def bench_rows(bench: Bench, sides: Dict[str, List[Run]]) -> Tuple[Rows, bool, bool]:
    """Table rows of one bench, and whether a figure is worse / could not be compared. The
    must-be-identical figures that are identical collapse into one row."""
    names: List[str] = []
    specs: Dict[str, Figure] = {}
    for run in sides["old"] + sides["new"]:
        for name, (fig, _) in run.figures.items():
            if name not in specs:
                names.append(name)
                specs[name] = fig
    rows: Rows = []
    worse = broken = False
    identical = 0
    for name in names:
        values = {s: [run.figures[name][1] for run in sides[s] if name in run.figures]
                  for s in ("old", "new")}
        o, n, ratio, verdict, bad = compare(specs[name], values["old"], values["new"])
        if verdict == "identical":
            identical += 1
            continue
        rows.append((bench.name, name + MARK[specs[name].better], o, n, ratio, verdict))
        worse |= bad and verdict.startswith(("WORSE", "DIFFERS"))
        broken |= bad and not verdict.startswith(("WORSE", "DIFFERS"))
    for fig in bench.figures:                   # a pattern that matched nothing in a run
        lost = [s for s in ("old", "new") for run in sides[s]
                if not run.error and all(spec is not fig for spec, _ in run.figures.values())]
        if lost:
            rows.append((bench.name, fig.name, "-", "-", "-",
                         f"NOT FOUND in {'/'.join(sorted(set(lost)))}"))
            broken = True
    if identical:
        rows.append((bench.name, f"{identical} must-be-identical figures (=)", "-", "-", "-",
                     "identical"))
    if not names:
        rows.append((bench.name, "(no figure: see the failures below)", "-", "-", "-", "FAILED"))
    broken |= not names or any(run.error for runs in sides.values() for run in runs)
    return rows, worse, broken


def report(benches: Sequence[Bench], runs: Dict[str, Dict[str, List[Run]]],
           trees: Dict[str, Path]) -> int:
    """Print the table and the failures; the exit status."""
    rows: Rows = [("bench", "figure", "old (median)", "new (median)", "new/old", "verdict")]
    worse = broken = False
    failures = []
    for bench in benches:
        bench_table, bench_worse, bench_broken = bench_rows(bench, runs[bench.name])
        rows += bench_table
        worse, broken = worse or bench_worse, broken or bench_broken
        for side in ("old", "new"):
            failures += [f"bench_{bench.name} failed in {side} ({trees[side]}), {run.error}"
                         for run in runs[bench.name][side] if run.error]
    print(table(rows))
    print("(+) higher is better, (-) lower is better, (=) must be identical, (i) shown only; "
          f"threshold {THRESHOLD:.0f} %")
    for failure in failures:
        print(f"\n{failure}")
    return 1 if worse else 2 if broken else 0


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def select(only: Optional[str], with_trainer: bool) -> List[Bench]:
    if not only:
        return [b for b in BENCHES if with_trainer or not b.optional]
    names = [n.strip().removeprefix("bench_").removesuffix(".py") for n in only.split(",")]
    known = {b.name: b for b in BENCHES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown bench(es): {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]


def measure(benches: Sequence[Bench], trees: Dict[str, Path],
            opts: argparse.Namespace) -> Dict[str, Dict[str, List[Run]]]:
    """Run every bench in both trees, ``opts.rounds`` times, pairs adjacent in time."""
    runs: Dict[str, Dict[str, List[Run]]] = {b.name: {"old": [], "new": []} for b in benches}
    for r in range(opts.rounds):
        for bench in benches:
            for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                started = time.perf_counter()
                run = run_bench(bench, trees[side], opts.python, opts.quick, opts.keep_logs,
                                f"{side}.r{r + 1}")
                runs[bench.name][side].append(run)
                print(f"[round {r + 1}/{opts.rounds}] bench_{bench.name} {side}: "
                      f"{'FAILED' if run.error else f'{len(run.figures)} figures'} in "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return runs


def main(argv: Optional[Sequence[str]] = None) -> int:
    here = Path(__file__).resolve().parents[1]
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--old", type=Path, default=Path("/work/wt/base"), help="old tree")
    cli.add_argument("--new", type=Path, default=here, help="new tree (default: this checkout)")
    cli.add_argument("--python", default=sys.executable, help="interpreter for both trees")
    cli.add_argument("--rounds", type=int, default=2, help="old/new pairs per bench (median)")
    cli.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    cli.add_argument("--only", metavar="NAME[,NAME]", help="benches to run (engine, replay, ...)")
    cli.add_argument("--with-trainer", action="store_true",
                     help="include bench_trainer_overhead (trains MindSpore; minutes)")
    cli.add_argument("--keep-logs", type=Path, metavar="DIR", help="write each raw output there")
    cli.add_argument("--from-logs", type=Path, metavar="DIR",
                     help="run nothing: compare the outputs a --keep-logs run wrote to DIR")
    cli.add_argument("--list", action="store_true", help="list the benches and figures, exit")
    opts = cli.parse_args(argv)
    try:
        benches = select(opts.only, opts.with_trainer or opts.from_logs is not None)
    except ValueError as exc:
        cli.error(str(exc))
    if opts.list:
        for b in benches:
            print(f"bench_{b.name}.py  quick: {' '.join(b.quick) or '(defaults)'}  "
                  f"full: {' '.join(b.full) or '(defaults)'}{'  [optional]' if b.optional else ''}")
            for f in b.figures:
                what = {"same": "must be identical", "info": "shown, not gated"}
                print(f"    {f.name}  ({what.get(f.better, f.better + ' is better')})")
        return 0
    trees = {"old": opts.old.resolve(), "new": opts.new.resolve()}
    if opts.from_logs:
        runs = {b.name: {s: from_logs(b, s, opts.from_logs) for s in ("old", "new")}
                for b in benches}
        benches = [b for b in benches if any(runs[b.name].values())]
        print(f"outputs read back from {opts.from_logs}")
    else:
        print(f"old {trees['old']}  vs  new {trees['new']}; {'quick' if opts.quick else 'full'} "
              f"sizes, {opts.rounds} round(s); load average {load_average()} on "
              f"{os.cpu_count()} CPUs", flush=True)
        runs = measure(benches, trees, opts)
        print(f"load average at the end {load_average()}", flush=True)
    return report(benches, runs, trees)


if __name__ == "__main__":
    sys.exit(main())

"""promtool-style rule unit tests: synthetic series in, expected firing alerts out.

A test file names rule files and a list of tests; each test gives per-rank
series in the expanding notation (:mod:`.series`) and checks which alerts are
firing right after a given step (``at_step``) or at a given time (``at_time``,
which also ticks the clock). The engine is fed through its public interface
(events -> :func:`~msdoctor.core.batch.columnize` -> ``process``/``on_tick``), ranks
interleaved ``slab`` steps at a time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import yaml

from msdoctor.core.alerts.active import ActiveAlerts
from msdoctor.core.alerts.model import Alert
from msdoctor.core.batch import DERIVED, columnize
from msdoctor.core.engine.errors import RuleSetError
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import StrPath, load_rules
from msdoctor.core.engine.notation import NotationError, expand
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.schema import STEP_SIGNALS, make

RUN = "test"
RANK_KEYS = ("rank", "interval_s", "start_t", "series", "world_size", "run_end")
TEST_KEYS = ("name", "ranks", "alert_rule_test", "slab", "tick_s")
MAX_TICKS = 100_000
CHECK_KEYS = ("at_step", "at_time", "alertname", "exp_alerts")
SERIES_SIGNALS = STEP_SIGNALS + ("overflow", "step") + DERIVED


class RuleTestError(MsdoctorError, ValueError):
    pass


@dataclass
class TestResult:
    file: str
    name: str
    failures: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class _Rank:
    rank: int
    steps: np.ndarray
    t: np.ndarray
    events: List[Dict[str, Any]]              # step events, aligned with steps
    overrides: Dict[str, List[Optional[float]]]
    start: Dict[str, Any]
    end: Optional[Tuple[int, Dict[str, Any]]]  # (after index, run_end event)
    pos: int = 0
    started: bool = False
    ended: bool = False


def run_test_file(path: StrPath) -> List[TestResult]:
    """Run every test of one file; problems with the file itself become a failed result."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return [TestResult(str(path), "(file)", [f"cannot read test file: {exc}"])]
    if not isinstance(doc, dict) or not isinstance(doc.get("tests"), list):
        return [TestResult(str(path), "(file)", ["expected a mapping with 'rule_files' and "
                                                 "'tests' (a list)"])]
    unknown = set(doc) - {"rule_files", "tests"}
    if unknown:
        return [TestResult(str(path), "(file)", [f"unknown key(s) {sorted(unknown)}: expected "
                                                 f"rule_files, tests"])]
    files = doc.get("rule_files") or []
    if isinstance(files, str):
        files = [files]
    try:
        rules = load_rules([path.parent / f for f in files])
    except RuleSetError as exc:
        return [TestResult(str(path), "(rule files)", [str(e) for e in exc.errors])]
    results = []
    for i, test in enumerate(doc["tests"], 1):
        name = test.get("name", f"#{i}") if isinstance(test, dict) else f"#{i}"
        result = TestResult(str(path), str(name))
        try:
            result.failures = run_test(rules, test)
        except (RuleTestError, NotationError) as exc:
            result.failures = [f"invalid test: {exc}"]
        results.append(result)
    return results


def _keys(d: Any, allowed: Sequence[str], what: str) -> Dict[str, Any]:
    if not isinstance(d, dict):
        raise RuleTestError(f"{what} must be a mapping")
    for key in d:
        if key not in allowed and not (what.startswith("rank") and
                                       (str(key).startswith("expect_") or str(key).startswith("config_"))):
            raise RuleTestError(f"{what}: unknown key {key!r} (expected {', '.join(allowed)}"
                                f"{', expect_NAME, config_NAME' if what.startswith('rank') else ''})")
    return d


def _build_rank(spec: Dict[str, Any]) -> _Rank:
    spec = _keys(spec, RANK_KEYS, f"rank {spec.get('rank', '?') if isinstance(spec, dict) else '?'}")
    rank = int(spec.get("rank", 0))
    interval = float(spec.get("interval_s", 1.0))
    start_t = float(spec.get("start_t", 0.0))
    series = spec.get("series") or {}
    if not isinstance(series, dict):
        raise RuleTestError(f"rank {rank}: series must be a mapping signal -> values")
    expanded: Dict[str, List[Optional[float]]] = {}
    for name, text in series.items():
        if name not in SERIES_SIGNALS:
            raise RuleTestError(f"rank {rank}: unknown signal {name!r} (expected one of "
                                f"{', '.join(SERIES_SIGNALS)})")
        try:
            expanded[name] = expand(text)
        except NotationError as exc:
            raise RuleTestError(f"rank {rank}, series {name}: {exc}") from None
    length = max((len(v) for k, v in expanded.items()), default=0)
    step_vals = expanded.pop("step", None)
    if step_vals is None:
        steps = np.arange(1, length + 1, dtype=np.int64)
    else:
        if any(v is None or not math.isfinite(v) for v in step_vals):
            raise RuleTestError(f"rank {rank}: the step series must be numbers only")
        steps = np.asarray(step_vals, dtype=np.int64)
        length = len(step_vals)
    t = start_t + interval * np.arange(1, length + 1)
    events = []
    overrides = {k: v for k, v in expanded.items() if k in DERIVED and k != "overflow"}
    for i in range(length):
        fields: Dict[str, Any] = {}
        for name, values in expanded.items():
            if name in overrides or i >= len(values) or values[i] is None:
                continue
            fields[name] = bool(values[i]) if name == "overflow" else values[i]
        events.append(make("step", rank, run=RUN, step=int(steps[i]), t=float(t[i]), **fields))
    expect = {k[len("expect_"):]: v for k, v in spec.items() if str(k).startswith("expect_")}
    config = {k[len("config_"):]: v for k, v in spec.items() if str(k).startswith("config_")}
    start = make("run_start", rank, run=RUN, t=start_t, world_size=spec.get("world_size"),
                 config=config, expect=expect)
    end = None
    if spec.get("run_end") is not None:
        re_spec = spec["run_end"]
        if not isinstance(re_spec, dict) or "after_step" not in re_spec:
            raise RuleTestError(f"rank {rank}: run_end must be {{after_step: N, status: ...}}")
        after = int(np.searchsorted(steps, int(re_spec["after_step"]), side="right"))
        t_end = float(t[after - 1]) if after else start_t
        end = (after, make("run_end", rank, run=RUN, t=t_end,
                           status=str(re_spec.get("status", "completed"))))
    return _Rank(rank, steps, t, events, overrides, start, end)


def run_test(rules: Any, test: Dict[str, Any]) -> List[str]:
    """Run one test against ``rules``; return the failure messages (empty: passed)."""
    test = _keys(test, TEST_KEYS, "test")
    ranks = [_build_rank(r) for r in (test.get("ranks") or [])]
    if not ranks:
        raise RuleTestError("a test needs 'ranks' with at least one series")
    slab = int(test.get("slab", 8))
    last_firing: Dict[Tuple[str, int], Alert] = {}

    def remember(alert: Alert) -> None:
        if alert.state == "firing":
            last_firing[(alert.alert, alert.rank)] = alert

    alerts = ActiveAlerts()
    engine = Engine(rules, sinks=[remember, alerts])
    known = {r.alert for r in rules}
    checks = []
    for i, check in enumerate(test.get("alert_rule_test") or []):
        check = _keys(check, CHECK_KEYS, "alert_rule_test entry")
        if ("at_step" in check) == ("at_time" in check):
            raise RuleTestError("each alert_rule_test entry needs exactly one of at_step, at_time")
        if check.get("alertname") not in known:
            raise RuleTestError(f"alertname {check.get('alertname')!r} is not a rule of the "
                                f"rule files ({', '.join(sorted(known))})")
        if "at_step" in check:
            targets = [int(np.searchsorted(r.steps, int(check["at_step"]), side="right"))
                       for r in ranks]
            when = max((float(r.t[k - 1]) for r, k in zip(ranks, targets) if k), default=-math.inf)
        else:
            now = min(r.start["t"] for r in ranks) + float(check["at_time"])
            targets = [int(np.searchsorted(r.t, now, side="right")) for r in ranks]
            when = now
        checks.append((when, 0 if "at_step" in check else 1, i, check, targets))
    tick_s = float(test.get("tick_s", 1.0))
    if not tick_s > 0:
        raise RuleTestError(f"tick_s must be a positive number of seconds, got {tick_s!r}")
    failures: List[str] = []
    last_tick = -math.inf
    for when, kind, _, check, targets in sorted(checks, key=lambda c: c[:3]):
        _advance(engine, ranks, targets, slab)
        if kind == 1:
            # the sidecar ticks every poll: tick every tick_s seconds since the last event
            seen = max(float(r.t[r.pos - 1]) if r.pos else float(r.start["t"]) for r in ranks)
            start = max(seen, last_tick)
            count = min(int((when - start) // tick_s), MAX_TICKS) if when > start else 0
            times = [start + k * tick_s for k in range(1, count + 1)]
            if not times or times[-1] < when:
                times.append(when)
            for now in times:
                engine.on_tick(now)
            last_tick = when
        failures.extend(_compare(alerts, rules, check, last_firing))
    return failures


def _advance(engine: Engine, ranks: List[_Rank], targets: List[int], slab: int) -> None:
    while True:
        moved = False
        for r, target in zip(ranks, targets):
            others: List[Dict[str, Any]] = []
            if not r.started:
                others.append(r.start)
                r.started = True
            stop = min(r.pos + max(slab, 1), target)
            if stop > r.pos:
                batch = columnize(RUN, r.rank, r.events[r.pos:stop])
                for name, values in r.overrides.items():
                    col = np.array([np.nan if i >= len(values) or values[i] is None else values[i]
                                    for i in range(r.pos, stop)], dtype=np.float64)
                    mask = ~np.isnan(col) | np.array([i < len(values) and values[i] is not None
                                                      for i in range(r.pos, stop)])
                    if mask.any():
                        batch.columns[name] = col
                        if not mask.all():
                            batch.masks[name] = mask
                r.pos = stop
                moved = True
                engine.process(RUN, r.rank, others, batch)
            elif others:
                engine.process(RUN, r.rank, others, None)
            if r.end is not None and not r.ended and r.pos >= r.end[0] and r.pos <= target:
                r.ended = True
                engine.process(RUN, r.rank, [r.end[1]], None)
        if not moved:
            return


def _compare(alerts: ActiveAlerts, rules: Any, check: Dict[str, Any],
             last_firing: Dict[Tuple[str, int], Alert]) -> List[str]:
    name = check["alertname"]
    rule = next(r for r in rules if r.alert == name)
    got = []
    for a in (a for a in alerts.firing() if a["alert"] == name):
        labels = {"alertname": name, "rank": str(a["rank"]), "run": a["run"], **rule.labels}
        alert = last_firing.get((name, a["rank"]))
        got.append((labels, alert.annotations if alert else {}))
    expected = check.get("exp_alerts") or []
    where = (f"at_step {check['at_step']}" if "at_step" in check else f"at_time {check['at_time']}")
    problems = []
    remaining = list(got)
    for exp in expected:
        exp = _keys(exp, ("labels", "annotations_contain"), "exp_alerts entry")
        want = {str(k): str(v) for k, v in (exp.get("labels") or {}).items()}
        contains = {str(k): str(v) for k, v in (exp.get("annotations_contain") or {}).items()}
        match = None
        for item in remaining:
            labels, annotations = item
            if all(labels.get(k) == v for k, v in want.items()) and \
                    all(v in annotations.get(k, "") for k, v in contains.items()):
                match = item
                break
        if match is None:
            problems.append(f"expected {want}{' containing ' + str(contains) if contains else ''}")
        else:
            remaining.remove(match)
    if problems or remaining:
        lines = [f"{where}, alertname {name}: firing alerts differ"]
        lines += [f"  - missing: {p}" for p in problems]
        lines += [f"  + unexpected: {{rank: {lab['rank']}}} summary={ann.get('summary', '')!r}"
                  for lab, ann in remaining]
        lines += [f"    expected {len(expected)} firing, got {len(got)}: "
                  + ", ".join(f"rank {lab['rank']}: {ann.get('summary', '')!r}" for lab, ann in got)]
        return ["\n".join(lines)]
    return []


def default_test_files(rules_dir: Path) -> List[Path]:
    tests = Path(rules_dir) / "tests"
    return sorted(p for p in tests.glob("*.yaml")) + sorted(tests.glob("*.yml")) if tests.is_dir() else []

"""The shipped rule set: it loads clean, every rule has unit tests, and they all pass."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from msdoctor.core.engine import check_rules, default_rules_dir, load_rules
from msdoctor.core.engine.ruletest import run_test_file

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "rules"
TESTS = sorted((RULES / "tests").glob("*.yaml"))
RUNBOOK = REPO / "docs" / "runbook.md"

#: The alert names other parts of msdoctor and the benchmarks refer to, and
#: GradNormSpikesRecurring (what the bundled trainer's lr-high fault really shows).
REQUIRED = ("LossNonFinite", "GradNormNonFinite", "LossPlateau", "LossSpike",
            "LossSpikesPeriodic", "LossOscillating", "UpdatesStalled", "GradNormSpike",
            "GradNormSpikesRecurring",
            "LossScaleStuck", "LossScaleCollapse", "DataLoaderStarved",
            "ThroughputBelowBaseline", "MemoryGrowth", "MemoryNearCapacity", "JobHung",
            "StragglerRank", "StepCountMismatch")


def test_the_shipped_rules_are_the_default_rule_directory():
    assert Path(default_rules_dir()).resolve() == RULES.resolve()


def test_the_shipped_rules_load_without_a_single_error():
    ruleset, errors = check_rules([RULES])
    assert [str(e) for e in errors] == []
    assert len(ruleset) >= len(REQUIRED)


def test_msdoctor_rules_check_passes_on_the_shipped_rules():
    proc = subprocess.run([sys.executable, "-m", "msdoctor", "rules", "check", str(RULES)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"ok: \d+ rules in \d+ files", proc.stdout)


def test_every_required_alert_is_shipped_with_severity_summary_cause_fix_and_runbook():
    rules = {r.alert: r for r in load_rules([RULES])}
    assert set(REQUIRED) <= set(rules)
    anchors = set(re.findall(r"^## (\w+)$", RUNBOOK.read_text(encoding="utf-8"), re.M))
    for name, rule in rules.items():
        assert rule.severity in ("info", "warning", "critical"), name
        for key in ("summary", "cause", "fix", "runbook_url"):
            assert key in rule.templates, f"{name} has no {key}"
        assert rule.annotations["runbook_url"] == f"docs/runbook.md#{name.lower()}", name
        assert name in anchors, f"docs/runbook.md has no section '## {name}'"


def test_no_shipped_rule_stops_training_by_default():
    assert [r.alert for r in load_rules([RULES]) if r.action] == []


def _tested_alerts() -> set:
    names = set()
    for path in TESTS:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for test in doc["tests"]:
            for check in test["alert_rule_test"]:
                names.add((check["alertname"], bool(check["exp_alerts"])))
    return names


def test_every_shipped_rule_has_a_firing_and_a_not_firing_unit_test():
    tested = _tested_alerts()
    for rule in load_rules([RULES]):
        assert (rule.alert, True) in tested, f"no test expects {rule.alert} to fire"
        assert (rule.alert, False) in tested, f"no test expects {rule.alert} to stay quiet"


@pytest.mark.parametrize("path", TESTS, ids=[p.stem for p in TESTS])
def test_the_rule_unit_tests_pass(path):
    results = run_test_file(path)
    assert results, f"{path} has no tests"
    failures = [f"{r.name}:\n" + "\n".join(r.failures) for r in results if not r.passed]
    assert failures == []


def test_msdoctor_rules_test_on_a_shipped_test_file_passes_what_the_runner_passes():
    """The command line over one shipped file (each file's tests are run in-process above;
    running them all again in a subprocess would double the suite's longest test)."""
    path = min(TESTS, key=lambda p: p.stat().st_size)
    proc = subprocess.run([sys.executable, "-m", "msdoctor", "rules", "test", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    passed = int(re.search(r"(\d+) passed, 0 failed", proc.stdout + proc.stderr).group(1))
    assert passed == len(run_test_file(path)) > 0


def test_a_stall_that_lasts_notifies_its_collapse_and_keeps_the_slowdown_as_its_consequence(
        tmp_path):
    from msdoctor.replay.driver import replay_paths

    log = tmp_path / "steps.csv"
    times = [30.0] + [1.0] * 599 + [8.0] * 200          # compile, 599 steps of 1 s, then 8 s
    log.write_text("step,loss,step_time_s\n" + "".join(
        f"{i + 1},{3.0 - i / 1000:.4f},{t}\n" for i, t in enumerate(times)))
    result = replay_paths([str(log)], load_rules([default_rules_dir()]), fmt="csv",
                          progress=False)
    firing = [(a["alert"], a["step"], a.get("caused_by")) for a in result["alerts"]
              if a["alert"].startswith("Throughput")]
    assert firing[0] == ("ThroughputCollapse", 602, None)          # the second 8 s step
    slow = [f for f in firing if f[0] == "ThroughputBelowBaseline"]
    assert slow and slow[0][1] > 602 and slow[0][2] == "ThroughputCollapse", firing

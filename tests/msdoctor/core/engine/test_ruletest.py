"""The promtool-style rule test runner."""
from __future__ import annotations

from pathlib import Path

from msdoctor.core.engine.ruletest import run_test_file

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "rules"

TESTS = """
rule_files: [{rules}]
tests:
  - name: a NaN loss fires at once
    ranks:
      - rank: 0
        series:
          step: "1+1x199"
          loss: "3-0.01x99 nan _x99"
    alert_rule_test:
      - at_step: 101
        alertname: LossNonFinite
        exp_alerts:
          - labels: {{rank: 0, severity: critical}}
            annotations_contain: {{summary: "nan"}}
      - at_step: 50
        alertname: LossNonFinite
        exp_alerts: []
  - name: a wrong expectation fails with a diff
    ranks:
      - rank: 0
        series: {{loss: "1 nan 1"}}
    alert_rule_test:
      - at_step: 2
        alertname: LossNonFinite
        exp_alerts: []
  - name: a hung rank is found on a clock tick
    ranks:
      - rank: 0
        interval_s: 10
        series: {{loss: "1x9"}}
      - rank: 1
        interval_s: 10
        series: {{loss: "1x9"}}
        run_end: {{after_step: 10, status: completed}}
    alert_rule_test:
      - at_time: 200
        alertname: JobHung
        exp_alerts: []
      - at_time: 800
        alertname: JobHung
        exp_alerts:
          - labels: {{rank: 0}}
  - name: an unknown signal is reported as an invalid test
    ranks:
      - rank: 0
        series: {{los: "1"}}
    alert_rule_test: []
"""


def test_the_runner_passes_right_expectations_and_fails_wrong_ones(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TESTS.format(rules=FIXTURES / "full.good.yaml"))
    (tmp_path / "r.yaml").write_text((FIXTURES / "minimal.good.yaml").read_text())
    path.write_text(TESTS.format(rules="r.yaml").replace("rule_files: [r.yaml]",
                                                         f"rule_files: [r.yaml, {FIXTURES / 'full.good.yaml'}]"))
    results = {r.name: r for r in run_test_file(path)}
    assert results["a NaN loss fires at once"].passed, results["a NaN loss fires at once"].failures
    wrong = results["a wrong expectation fails with a diff"]
    assert not wrong.passed and "at_step 2, alertname LossNonFinite" in wrong.failures[0]
    assert "expected 0 firing, got 1" in wrong.failures[0]
    hung = results["a hung rank is found on a clock tick"]
    assert hung.passed, hung.failures
    bad = results["an unknown signal is reported as an invalid test"]
    assert "unknown signal 'los'" in bad.failures[0]


def test_a_broken_rule_file_fails_the_test_file_with_the_loader_errors(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(f"rule_files: [{FIXTURES / 'values.bad.yaml'}]\ntests: []\n")
    results = run_test_file(path)
    assert len(results) == 1 and not results[0].passed
    assert any("invalid 'for'" in f for f in results[0].failures)

"""``msdoctor rules check|test|list`` as a user runs them (subprocesses)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rules"
REPO = Path(__file__).resolve().parents[3]


def msdoctor(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msdoctor", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_check_prints_every_error_with_its_position_and_exits_1():
    bad = FIXTURES / "values.bad.yaml"
    proc = msdoctor("rules", "check", str(bad), str(FIXTURES / "structure.bad.yaml"))
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.startswith(str(FIXTURES))]
    assert len(lines) == 9 + 8
    assert f"{bad}:16:14: group \"g\" rule \"R1\": invalid 'for'" in proc.stderr
    assert "17 errors in 2 files" in proc.stderr


def test_check_passes_good_files_and_a_directory():
    proc = msdoctor("rules", "check", str(FIXTURES / "full.good.yaml"))
    assert proc.returncode == 0 and "ok: 3 rules in 1 file" in proc.stdout


def test_check_of_the_shipped_rules_passes():
    proc = msdoctor("rules", "check")
    assert proc.returncode == 0, proc.stderr


def test_check_of_a_missing_path_fails():
    proc = msdoctor("rules", "check", "/nonexistent/rules.yaml")
    assert proc.returncode == 1 and "no such file" in proc.stderr


def test_list_shows_name_severity_and_summary():
    proc = msdoctor("rules", "list", "--rules", str(FIXTURES / "full.good.yaml"))
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0].split() == ["ALERT", "SEVERITY", "SUMMARY"]
    assert any(line.startswith("JobHung") and "critical" in line and "No step for" in line
               for line in proc.stdout.splitlines())


def test_test_reports_pass_and_fail_with_a_diff(tmp_path):
    (tmp_path / "t.yaml").write_text(f"""
rule_files: [{FIXTURES / 'minimal.good.yaml'}]
tests:
  - name: fires on nan
    ranks: [{{rank: 0, series: {{loss: "1 nan"}}}}]
    alert_rule_test:
      - {{at_step: 2, alertname: LossNonFinite, exp_alerts: [{{labels: {{rank: 0}}}}]}}
  - name: wrongly expects silence
    ranks: [{{rank: 0, series: {{loss: "1 nan"}}}}]
    alert_rule_test:
      - {{at_step: 2, alertname: LossNonFinite, exp_alerts: []}}
""")
    proc = msdoctor("rules", "test", "-v", str(tmp_path / "t.yaml"))
    assert proc.returncode == 1
    assert "PASS" in proc.stdout and "fires on nan" in proc.stdout
    assert "FAIL" in proc.stdout and "wrongly expects silence" in proc.stdout
    assert "expected 0 firing, got 1" in proc.stdout and "1 passed, 1 failed" in proc.stdout


def test_list_names_the_causes_a_rule_is_a_consequence_of():
    proc = msdoctor("rules", "list", "--rules", str(FIXTURES / "causes.good.yaml"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    stalled = lines.index(next(x for x in lines if x.startswith("UpdatesStalled")))
    assert "↳ a consequence of GradNormNonFinite, LossNonFinite" in lines[stalled + 1]
    assert not any("consequence" in x for x in lines if x.startswith("LossNonFinite"))

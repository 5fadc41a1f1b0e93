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
    proc = msdoctor("rules", "list", "--no-default-rules", "--rules", str(FIXTURES / "full.good.yaml"))
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
    proc = msdoctor("rules", "list", "--no-default-rules", "--rules", str(FIXTURES / "causes.good.yaml"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    stalled = lines.index(next(x for x in lines if x.startswith("UpdatesStalled")))
    assert "↳ a consequence of GradNormNonFinite, LossNonFinite" in lines[stalled + 1]
    assert not any("consequence" in x for x in lines if x.startswith("LossNonFinite"))


def rule_folder(base: Path, name: str = "LossAboveTen", expr: str = "loss > 10") -> Path:
    """A user's rule folder: one rule file and, in tests/, its unit test."""
    folder = base / name.lower()
    (folder / "tests").mkdir(parents=True)
    (folder / "extra.yaml").write_text(f"""version: 1
groups:
  - name: {name.lower()}
    rules:
      - alert: {name}
        expr: {expr}
        labels: {{severity: warning}}
        annotations:
          summary: "Loss {{{{ $value }}}} on rank {{{{ $labels.rank }}}} at step {{{{ $step }}}}."
""")
    (folder / "tests" / "extra.yaml").write_text(f"""rule_files: [../extra.yaml]
tests:
  - name: fires above ten
    ranks: [{{rank: 0, series: {{loss: "1 11"}}}}]
    alert_rule_test:
      - {{at_step: 2, alertname: {name}, exp_alerts: [{{labels: {{rank: 0}}}}]}}
""")
    return folder


def alert_names(listing: str) -> set:
    return {line.split()[0] for line in listing.splitlines()[1:] if line[:1].strip()}


def test_rules_are_added_to_the_shipped_set_each_repeated_one_too_or_replace_it(tmp_path):
    a, b = rule_folder(tmp_path), rule_folder(tmp_path, "LossAboveTwenty", "loss > 20")
    shipped = alert_names(msdoctor("rules", "list").stdout)
    assert "LossNonFinite" in shipped and len(shipped) > 20
    both = msdoctor("rules", "list", "--rules", str(a), "--rules", str(b))
    assert both.returncode == 0, both.stderr
    assert alert_names(both.stdout) == shipped | {"LossAboveTen", "LossAboveTwenty"}
    only = msdoctor("rules", "list", "--no-default-rules", "--rules", str(a), "--rules", str(b))
    assert alert_names(only.stdout) == {"LossAboveTen", "LossAboveTwenty"}
    alone = msdoctor("rules", "list", "--no-default-rules")
    assert alone.returncode == 2 and "expected at least one --rules PATH" in alone.stderr


def test_list_shows_what_fills_each_template_instead_of_the_template():
    proc = msdoctor("rules", "list")
    assert proc.returncode == 0, proc.stderr
    assert "{{" not in proc.stdout and "}}" not in proc.stdout
    line = next(x for x in proc.stdout.splitlines() if x.startswith("LossNonFinite "))
    assert "<value>" in line and "<step>" in line and "<rank>" in line, line


def test_test_on_a_rule_folder_runs_the_tests_in_its_tests_subfolder(tmp_path):
    proc = msdoctor("rules", "test", "-v", str(rule_folder(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout and "fires above ten" in proc.stdout
    assert "1 passed, 0 failed" in proc.stdout


def test_an_alert_name_that_is_not_camel_case_is_refused_at_its_line_saying_what_is_expected(
        tmp_path):
    folder = rule_folder(tmp_path, "loss_above_ten")
    proc = msdoctor("rules", "check", str(folder / "extra.yaml"))
    assert proc.returncode == 1
    assert f"{folder / 'extra.yaml'}:5:16: " in proc.stderr
    assert "invalid alert name 'loss_above_ten': expected a CamelCase name" in proc.stderr


def test_an_expression_that_does_not_parse_says_where_and_what_was_expected(tmp_path):
    folder = rule_folder(tmp_path, expr="loss >> > 10")
    proc = msdoctor("rules", "check", str(folder))
    assert proc.returncode == 1
    assert "invalid syntax: invalid syntax" not in proc.stderr
    assert "invalid syntax at '> 10' (column 9): expected an expression such as" in proc.stderr

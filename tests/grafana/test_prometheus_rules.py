"""The generated Prometheus fleet rules pass promtool's checks and unit tests."""
import shutil
import subprocess

import pytest

from grafana.mixin import alerts
from grafana.mixin.render import RULES_PATH, render_rules

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed "
                                    "(scripts/bootstrap-system)")


@needs_promtool
def test_promtool_check_rules_accepts_the_committed_rule_file():
    out = subprocess.run([PROMTOOL, "check", "rules", str(RULES_PATH)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 6 rules found" in out.stdout


@needs_promtool
def test_promtool_unit_tests_of_the_fleet_rules_pass():
    test_file = RULES_PATH.with_name("msdoctor-fleet.test.yml")
    out = subprocess.run([PROMTOOL, "test", "rules", test_file.name], capture_output=True,
                         text=True, timeout=120, cwd=test_file.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


@needs_promtool
def test_the_fast_test_copy_of_the_rules_is_valid_too(tmp_path):
    path = tmp_path / "fast.rules.yml"
    path.write_text(render_rules(alerts.fast_params()))
    out = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_fleet_alert_says_what_to_do_and_links_its_runbook_section():
    for rule in alerts.alerting_rules():
        ann = rule["annotations"]
        assert ann["summary"] and ann["cause"] and ann["fix"], rule["alert"]
        assert ann["runbook_url"] == "docs/prometheus.md#" + rule["alert"].lower()
        assert rule["labels"]["severity"] in ("warning", "critical")


def test_the_prometheus_docs_list_every_metric_and_every_fleet_alert():
    from grafana.mixin.render import ROOT
    from msdoctor.exporter import names

    text = (ROOT / "docs" / "prometheus.md").read_text()
    missing = [s.sample_name for s in names.ALL if f"`{s.sample_name}`" not in text]
    missing += [r["alert"] for r in alerts.alerting_rules() if f"### {r['alert']}" not in text]
    assert not missing, f"docs/prometheus.md does not document: {missing}"

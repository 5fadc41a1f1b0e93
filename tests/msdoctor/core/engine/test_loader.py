"""The rule loader: every error with file:line:col, rule name and expected form."""
from __future__ import annotations

from pathlib import Path

import pytest

from msdoctor.core.engine.errors import RuleSetError
from msdoctor.core.engine.lifecycle import Duration
from msdoctor.core.engine.loader import (
    check_rules,
    default_rules_dir,
    load_rules,
    parse_duration,
    rule_files,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "rules"


def expectations(path: Path):
    return [line[len("# expect: "):].rstrip("\n") for line in path.read_text().splitlines()
            if line.startswith("# expect: ")]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.bad.yaml")), ids=lambda p: p.name)
def test_a_bad_rule_file_reports_every_expected_error_with_its_position(path):
    _, errors = check_rules([path])
    expected = expectations(path)
    assert expected, f"{path} has no '# expect:' lines"
    got = [str(e) for e in errors]
    assert len(got) == len(expected), "\n".join(got)
    for want in expected:
        assert any(g.startswith(f"{path}:{want}") for g in got), f"{want!r} not in:\n" + "\n".join(got)
    with pytest.raises(RuleSetError) as info:
        load_rules([path])
    assert len(info.value.errors) == len(expected)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.good.yaml")), ids=lambda p: p.name)
def test_a_good_rule_file_loads_without_errors(path):
    ruleset, errors = check_rules([path])
    assert errors == [] and len(ruleset) >= 1


def test_a_good_file_is_loaded_into_rules_with_compiled_parts():
    rules = load_rules([FIXTURES / "full.good.yaml"])
    periodic = rules.get("LossSpikesPeriodic")
    assert periodic.for_ == Duration(10, "steps") and periodic.keep_firing_for == Duration(300, "s")
    assert periodic.severity == "warning" and periodic.labels["team"] == "ml"
    assert periodic.action == "stop_training" and "z" in periodic.values
    assert periodic.value.key == "spike_period(loss,2000)"
    hung = rules.get("JobHung")
    assert hung.time_based and hung.uses_clock and hung.for_ == Duration(30, "s")
    assert rules.get("ThroughputBelowBaseline").time_based        # for: 1h
    assert [r.group for r in rules] == ["training", "training", "throughput"]


@pytest.mark.parametrize("text,expected", [
    ("0 steps", Duration(0, "steps")), ("1 step", Duration(1, "steps")), ("10 steps", Duration(10, "steps")),
    ("30s", Duration(30, "s")), ("5m", Duration(300, "s")), ("1h", Duration(3600, "s")),
    ("1.5s", Duration(1.5, "s")), ("ten", None), ("10", None), (10, None), ("-1 steps", None),
    ("5 minutes", None), ("1.5 steps", None),
    ("500 steps and 10 records", Duration(500, "steps", 10)), ("30s and 1 record", Duration(30, "s", 1)),
    ("10 records", None), ("500 steps and records", None), ("500 steps and 1.5 records", None),
    ("500 steps or 10 records", None),
])
def test_durations_accept_steps_seconds_minutes_and_hours_only(text, expected):
    assert parse_duration(text) == expected


def test_a_directory_means_its_yaml_files_without_recursing(tmp_path):
    (tmp_path / "a.yaml").write_text("x")
    (tmp_path / "b.yml").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.yaml").write_text("x")
    assert [p.name for p in rule_files([tmp_path])] == ["a.yaml", "b.yml"]


def test_duplicate_alert_names_across_files_are_errors(tmp_path):
    text = (FIXTURES / "minimal.good.yaml").read_text()
    (tmp_path / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(text.replace("name: loss", "name: other"))
    _, errors = check_rules([tmp_path])
    assert len(errors) == 1
    assert str(errors[0]).startswith(f"{tmp_path / 'b.yaml'}:5:16: group \"other\" rule \"LossNonFinite\": "
                                     f"duplicate alert name 'LossNonFinite' (first defined at {tmp_path / 'a.yaml'}:5)")


def test_an_empty_or_unreadable_file_is_an_error(tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    _, errors = check_rules([tmp_path / "empty.yaml", tmp_path / "missing.yaml"])
    assert "empty rule file" in str(errors[0]) and "cannot read rule file" in str(errors[1])


def test_the_default_rules_dir_is_the_repositorys_rules_folder():
    assert default_rules_dir() == Path(__file__).resolve().parents[4] / "rules"


def test_a_python_object_tag_is_a_positioned_error_not_a_crash(tmp_path):
    path = tmp_path / "tagged.yaml"
    path.write_text("version: 1\ngroups:\n  - name: g\n    rules:\n      - alert: A\n"
                    "        expr: loss > 1\n        labels: {severity: !!python/object warning}\n"
                    "        annotations: {summary: s, cause: c, fix: f}\n")
    _, errors = check_rules([path])
    messages = [str(e) for e in errors]
    assert any(f"{path}:7:" in m and "unsupported YAML tag 'tag:yaml.org,2002:python/object'" in m
               for m in messages), messages


def test_consequence_of_takes_one_alert_name_or_a_list_of_them():
    rules = load_rules([FIXTURES / "causes.good.yaml"])
    assert rules.get("UpdatesStalled").consequence_of == ("GradNormNonFinite", "LossNonFinite")
    assert rules.get("GradNormNonFinite").consequence_of == ("LossNonFinite",)
    assert rules.get("LossNonFinite").consequence_of == ()


def test_a_cause_in_another_file_of_the_set_is_known_and_one_left_out_is_an_error(tmp_path):
    text = (FIXTURES / "causes.good.yaml").read_text()
    head, tail = text.split("      - alert: LossNonFinite\n")
    (tmp_path / "a.yaml").write_text(head)
    (tmp_path / "b.yaml").write_text("version: 1\ngroups:\n  - name: h\n    rules:\n"
                                     "      - alert: LossNonFinite\n" + tail)
    assert check_rules([tmp_path])[1] == []
    _, errors = check_rules([tmp_path / "a.yaml"])
    assert [(e.line, e.col, e.rule) for e in errors] == [
        (7, 45, "UpdatesStalled"), (12, 25, "GradNormNonFinite")]
    assert all("unknown alert 'LossNonFinite'" in e.message for e in errors)


def test_every_shipped_cause_names_a_shipped_rule_and_the_nan_groups_are_declared():
    rules = load_rules([default_rules_dir()])
    names = {r.alert for r in rules}
    for rule in rules:
        assert set(rule.consequence_of) <= names, rule.alert
    for consequence in ("GradNormNonFinite", "UpdatesStalled", "LossPlateau"):
        assert "LossNonFinite" in rules.get(consequence).consequence_of
    for consequence in ("UpdatesStalled", "LossPlateau", "LossScaleStuck"):
        assert "LossScaleCollapse" in rules.get(consequence).consequence_of

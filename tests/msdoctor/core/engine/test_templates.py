"""Annotation templates and the promtool series notation."""
from __future__ import annotations

import math

import pytest

from msdoctor.core.engine.notation import NotationError, expand
from msdoctor.core.engine.templates import TemplateError, parse_template

SCOPE = {"value": 0.12345678, "step": 120, "first_step": 100, "run": "r1",
         "labels": {"rank": "3", "severity": "critical"}, "values": {"period": 300.0}}


@pytest.mark.parametrize("text,expected", [
    ("Loss is {{ $value }} at step {{ $step }}", "Loss is 0.123457 at step 120"),
    ("{{$labels.rank}}/{{ $labels.severity }} {{ $run }} {{ $first_step }}", "3/critical r1 100"),
    ("every {{ $values.period }} steps", "every 300 steps"),
    ('{{ $value | printf "%.2g" }}', "0.12"),
    ('{{ $value | printf "%.1f" }}', "0.1"),
    ("{{ $value | humanizePercentage }}", "12.35%"),
    ("no refs", "no refs"),
])
def test_templates_render_the_allowed_references(text, expected):
    assert parse_template(text).render(SCOPE) == expected


def test_non_finite_values_render_as_nan_and_inf():
    assert parse_template("{{ $value }}").render({"value": math.nan}) == "nan"
    assert parse_template('{{ $value | printf "%.3g" }}').render({"value": -math.inf}) == "-inf"


def test_a_humanized_value_that_was_not_recorded_says_so_without_its_unit():
    text = "host {{ $values.host | humanize }}B, device {{ $values.device | humanize }}B."
    rendered = parse_template(text).render({"values": {"host": math.nan, "device": 2.5e9}})
    assert rendered == "host not recorded, device 2.5GB."
    assert parse_template("{{ $value | humanizePercentage }} of it").render(
        {"value": math.nan}) == "not recorded of it"


@pytest.mark.parametrize("text,message", [
    ("{{ $foo }}", "unknown template reference '$foo'"),
    ("{{ .Value }}", "unknown template reference"),
    ("{{ $value | lower }}", "unknown template filter 'lower'"),
    ('{{ $value | printf "%x" }}', "unknown template filter"),
    ("{{ $value | humanize | humanize }}", "at most one '|'"),
    ("{{ $value ", "unbalanced"),
    ("{{ index $labels 0 }}", "unknown template reference"),
])
def test_anything_else_in_a_template_is_an_error(text, message):
    with pytest.raises(TemplateError) as info:
        parse_template(text)
    assert message in str(info.value)


@pytest.mark.parametrize("text,expected", [
    ("1 2 3", [1, 2, 3]), ("1+1x3", [1, 2, 3, 4]), ("3-0.5x2", [3, 2.5, 2]), ("7x2", [7, 7, 7]),
    ("_ 1 _x2", [None, 1, None, None]), ("1e3 -inf", [1000, -math.inf]), (5, [5]),
])
def test_the_series_notation_expands_like_promtool(text, expected):
    assert expand(text) == expected


def test_the_contract_example_expands_to_200_values():
    values = expand("3-0.01x99 nan _x99")
    assert len(values) == 200 and math.isnan(values[100]) and values[101] is None
    assert values[99] == pytest.approx(2.01)


@pytest.mark.parametrize("text", ["1+x3", "abc", "1+1", "1x", [1, 2]])
def test_bad_series_are_errors(text):
    with pytest.raises(NotationError):
        expand(text)

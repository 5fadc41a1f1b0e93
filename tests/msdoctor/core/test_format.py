"""The one set of number formatters: table cells, axes, logs and template filters."""
from __future__ import annotations

import math

import pytest

from msdoctor.core import format as fmt


@pytest.mark.parametrize("value, digits, text", [
    (2.5, 4, "2.5"), (1.25, 4, "1.25"), (0.002, 3, "0.002"), (0.0, 4, "0"),
    (3e-4, 3, "3.0e-4"), (65536.0, 4, "6.6e4"), (-12345.0, 4, "-1.2e4"),
    (math.nan, 4, "nan"), (math.inf, 4, "inf"), (-math.inf, 4, "-inf"),
    (None, 4, "-"), (True, 4, "-"), ("2.5", 4, "-"),
])
def test_number_has_fixed_significant_digits_and_spells_out_non_finite_values(value, digits, text):
    assert fmt.number(value, digits) == text


def test_a_loss_scale_stays_an_exact_integer_until_a_million():
    assert fmt.loss_scale(65536.0) == "65536" and fmt.loss_scale(2.0 ** 31) == "2.1e9"
    assert fmt.loss_scale(0.5) == "0.5" and fmt.loss_scale(math.nan) == "nan"


@pytest.mark.parametrize("call, text", [
    (lambda: fmt.rate(8192.0), "8.19k"), (lambda: fmt.rate(16400.0), "16.4k"),
    (lambda: fmt.rate(12.0), "12"), (lambda: fmt.rate(2.5e6), "2.5M"),
    (lambda: fmt.rate(-1500.0), "-1.5k"), (lambda: fmt.rate(2e-5), "2.0e-5"),
    (lambda: fmt.byte_size(3 * 2 ** 30), "3G"), (lambda: fmt.byte_size(28.4 * 2 ** 30), "28.4G"),
    (lambda: fmt.byte_size(512), "512"), (lambda: fmt.byte_size(1536), "1.5K"),
    (lambda: fmt.si(2500.0), "2.5k"), (lambda: fmt.si(None), "-"),
    (lambda: fmt.si(1234.0, digits=4), "1.234k"), (lambda: fmt.si(2.005, digits=4), "2.005"),
])
def test_si_suffixes_decimal_for_rates_and_binary_for_bytes(call, text):
    assert call() == text


@pytest.mark.parametrize("seconds, text", [
    (0.48, "480ms"), (1.25, "1.25s"), (724, "12m04s"), (3 * 3600 + 12 * 60, "3h12m"),
    (2 * 86400 + 4 * 3600, "2d04h"), (-2.5, "-2.5s"), (math.inf, "inf"), (None, "-"),
])
def test_duration_is_short_and_fixed_width(seconds, text):
    assert fmt.duration(seconds) == text


def test_percent_of_a_share():
    assert fmt.percent(0.1) == "10.0%" and fmt.percent(1.0) == "100%"
    assert fmt.percent(math.nan) == "nan" and fmt.percent(None) == "-"


def test_template_filters_keep_prometheus_semantics():
    assert fmt.humanize(1234.0) == "1.234k" and fmt.humanize(3.2e10) == "32G"
    assert fmt.humanize(0.002) == "2m" and fmt.humanize(math.nan) == "nan"
    assert fmt.humanize_duration(3723) == "1h 2m 3s" and fmt.humanize_duration(12.5) == "12.5s"
    assert fmt.humanize_percentage(0.12345678) == "12.35%"
    assert fmt.humanize_percentage(math.inf) == "inf"
    assert fmt.plain(3.0) == "3" and fmt.plain(0.1234567891) == "0.123457"


@pytest.mark.parametrize("text, shown", [
    ("run-a", "run-a"), ("é ключ 日本", "é ключ 日本"),
    ("a\x1b[31mb", "a\\x1b[31mb"), ("x\ny\r\tz", "x\\ny\\r\\tz"), ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"),
    ("\u202eevil\u2066", "\\u202eevil\\u2066"), ("a\u2028b", "a\\u2028b"),
])
def test_printable_makes_control_characters_and_direction_overrides_visible(text, shown):
    assert fmt.printable(text) == shown


def test_the_escaping_log_formatter_escapes_the_message_but_keeps_a_traceback(caplog):
    import logging

    formatter = fmt.EscapingFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "run %s", ("a\nINFO forged",), None)
    assert formatter.format(record) == "INFO run a\\nINFO forged"
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "bad\x1b", (), sys.exc_info())
    text = formatter.format(record)
    assert text.startswith("ERROR bad\\x1b\nTraceback") and "ValueError: boom" in text

"""The collector reads the sidecar's real state at scrape time; the fast exposition
renders exactly what prometheus_client would."""
from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from msdoctor.core.pipeline import Pipeline
from msdoctor.exporter import names
from msdoctor.exporter.collector import StoreCollector
from msdoctor.exporter.exposition import LabelCache, format_values, render

from spool_factory import append_steps, write_run


class Alerts:
    def __init__(self, active):
        self._active = active

    def active(self):
        return list(self._active)


class Receiver:
    receiver = "alertmanager"
    stats = {"sent": 3, "failed": 2, "dropped": 1}


@pytest.fixture
def sidecar(tmp_path):
    write_run(tmp_path, run='run "a"', ranks=(0, 1), steps=20, nan_at=18)
    sc = Pipeline(tmp_path, persist=False)
    sc.poll_once()
    return sc


def registry_for(collector):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def test_samples_carry_the_latest_values_and_counters_of_each_rank(sidecar):
    alerts = Alerts([{"alert": "LossNonFinite", "state": "firing", "severity": "critical",
                      "run": 'run "a"', "rank": 1}])
    reg = registry_for(StoreCollector(sidecar.store, alerts, [Receiver()]))
    labels = {"run": 'run "a"', "rank": "1"}
    state = sidecar.store.runs['run "a"'].ranks[1]
    assert reg.get_sample_value("msdoctor_grad_norm", labels) == state.latest["grad_norm"]
    assert math.isnan(reg.get_sample_value("msdoctor_loss", labels))
    assert reg.get_sample_value("msdoctor_last_step", labels) == 20
    assert reg.get_sample_value("msdoctor_steps_total", labels) == 20
    assert reg.get_sample_value("msdoctor_nonfinite_loss_steps_total", labels) == 3
    assert reg.get_sample_value("msdoctor_overflow_steps_total", labels) == 1   # step 17
    assert reg.get_sample_value("msdoctor_events_ingested_total", labels) == 22
    assert reg.get_sample_value("msdoctor_device_tokens_per_second", labels) == \
        pytest.approx(state.latest["tokens_per_s"])
    assert reg.get_sample_value("msdoctor_run_world_size", {"run": 'run "a"'}) == 2
    assert reg.get_sample_value("msdoctor_run_expected_device_tokens_per_second",
                                {"run": 'run "a"'}) == 16384
    assert reg.get_sample_value("msdoctor_alert", {
        "alertname": "LossNonFinite", "alertstate": "firing", "severity": "critical",
        "run": 'run "a"', "rank": "1", "caused_by": "", "layer": "", "first_rank": ""}) == 1
    assert reg.get_sample_value("msdoctor_alert_delivery_failures_total",
                                {"receiver": "alertmanager"}) == 2
    assert reg.get_sample_value("msdoctor_build_info", {
        "version": "0.1.0", "python_version": __import__("platform").python_version()}) == 1


def test_each_scrape_reads_the_state_afresh(sidecar, tmp_path):
    collector = StoreCollector(sidecar.store)
    reg = registry_for(collector)
    labels = {"run": 'run "a"', "rank": "0"}
    assert reg.get_sample_value("msdoctor_last_step", labels) == 20
    append_steps(tmp_path, 'run "a"', 0, first=21, count=5)
    sidecar.poll_once()
    assert reg.get_sample_value("msdoctor_last_step", labels) == 25
    assert reg.get_sample_value("msdoctor_steps_total", labels) == 25


def test_the_fast_exposition_is_byte_identical_to_generate_latest(sidecar):
    alerts = Alerts([{"alert": "X", "state": "pending", "severity": "warning", "run": 'run "a"',
                      "rank": None}])
    collector = StoreCollector(sidecar.store, alerts, [Receiver()])
    cache = LabelCache()
    expected = generate_latest(registry_for(collector))
    assert render(collector.families(), cache) == expected
    assert render(collector.families(), cache) == expected          # from the warm cache
    assert b'run="run \\"a\\""' in expected                          # label values escaped


def test_values_are_formatted_as_go_prints_them():
    assert format_values([1.5, 3e10, float("nan"), float("inf"), -float("inf"), 0.0, 1234567.0,
                          -2e7]) == ["1.5", "3e+10", "NaN", "+Inf", "-Inf", "0.0",
                                     "1.234567e+06", "-20000000.0"]


def test_values_of_every_magnitude_are_formatted_as_prometheus_client_formats_them():
    from prometheus_client.utils import floatToGoString

    rng = np.random.default_rng(7)
    values = [float(v) for v in rng.standard_normal(4000) * 10.0 ** rng.integers(-12, 24, 4000)]
    values += [1e6, 999999.9999, 1e16, 1e22, 123456789.0, 20, -1e6, 5e-324, 1.7976931348623157e308]
    values += [1e-4, -1e-4, 9.999999999999999e-05, 0.00010000000000000002, 999999.9999999999,
               -999999.9999999999, -0.0, 0.1, 1 / 3, 2.0 ** 52, 2.0 ** 53 + 2, 0.30000000000000004]
    values += [float(v) for v in 10.0 ** rng.uniform(-4, 6, 20000) * rng.choice([-1, 1], 20000)]
    assert format_values(values) == [floatToGoString(v) for v in values]


def test_values_are_formatted_the_same_without_orjson(monkeypatch):
    import msdoctor.exporter.exposition as exposition

    rng = np.random.default_rng(8)
    values = [float(v) for v in rng.standard_normal(3000) * 10.0 ** rng.integers(-8, 20, 3000)]
    values += [float("nan"), float("inf"), -0.0, 0.0, 1e-4, 1e6]
    fast = format_values(values)
    monkeypatch.setattr(exposition, "_orjson", None)
    assert format_values(values) == fast


def test_every_family_in_the_name_table_is_exposed_with_help_and_type(sidecar):
    body = render(StoreCollector(sidecar.store, Alerts([]), [Receiver()]).families(),
                  LabelCache()).decode()
    for spec in names.ALL:
        assert f"# HELP {spec.sample_name} " in body
        assert f"# TYPE {spec.sample_name} " in body


def test_names_follow_the_naming_guide():
    for spec in names.ALL:
        assert spec.name.startswith("msdoctor_"), spec.name
        assert not spec.name.endswith("_total"), "counters get _total from the client"
        assert spec.help.endswith("."), spec.name
    units = {"seconds", "bytes", "ratio", "second", "info", "size", "step", "running", "total"}
    for spec in names.RANK_GAUGES:
        assert spec.name.split("_")[-1] in units or spec.source in (
            "loss", "grad_norm", "loss_scale", "lr", "update_ratio"), spec.name


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_check_metrics_finds_nothing_to_complain_about(sidecar):
    collector = StoreCollector(sidecar.store, Alerts([{"alert": "A", "state": "firing",
                                                       "severity": "info", "run": "r",
                                                       "rank": 0}]), [Receiver()])
    out = subprocess.run(["promtool", "check", "metrics"],
                         input=render(collector.families(), LabelCache()), capture_output=True,
                         timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, b"", b"")


def test_goodput_and_badput_by_cause_are_exposed_per_run(sidecar):
    body = render(StoreCollector(sidecar.store, Alerts([])).families(), LabelCache()).decode()
    goodput = sidecar.store.runs['run "a"'].goodput.summary()
    ratio = [line for line in body.splitlines() if line.startswith("msdoctor_goodput_ratio{")]
    assert len(ratio) == 1 and float(ratio[0].split()[-1]) == pytest.approx(goodput["ratio"])
    causes = {line.split('cause="')[1].split('"')[0] for line in body.splitlines()
              if line.startswith("msdoctor_badput_seconds_total{")}
    assert causes == {"startup", "data_wait", "checkpoint", "hang", "downtime", "redone",
                      "evaluation"}


def test_layer_gradient_norms_are_one_series_per_layer_the_largest_over_ranks(tmp_path):
    from msdoctor.wire import encode, make

    from spool_factory import append_layers

    write_run(tmp_path, run="r", ranks=(0, 1, 2), steps=10)
    append_layers(tmp_path, "r", 0, 10)                   # block 1 x1000 at its last step
    append_layers(tmp_path, "r", 1, 9)
    with (tmp_path / "events" / "rank-2.jsonl").open("ab") as fh:     # a NaN on rank 2
        fh.write(encode(make("layers", 2, run="r", step=10, t=1.0,
                             names=["embedding", "layers.0", "layers.1", "lm_head"],
                             grad_norm=[None, math.nan, 1.0, 1.0])))
    sc = Pipeline(tmp_path, persist=False)
    sc.poll_once()
    reg = registry_for(StoreCollector(sc.store, Alerts([])))
    value = lambda layer: reg.get_sample_value("msdoctor_layer_grad_norm",   # noqa: E731
                                               {"run": "r", "layer": layer})
    assert value("layers.1") > 1000 and value("lm_head") < 2
    assert math.isnan(value("layers.0"))                # a non-finite rank wins
    assert value("embedding") < 2                       # not measured on rank 2: the others'
    body = render(StoreCollector(sc.store, Alerts([])).families(), LabelCache()).decode()
    assert sum(line.startswith("msdoctor_layer_grad_norm{") for line in body.splitlines()) == 4

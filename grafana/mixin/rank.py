"""The rank drill-down: one rank of one run, every signal, against the fleet."""
from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard
from grafana_foundation_sdk.models.dashboard import DashboardLinkType

from grafana.mixin.common import (
    RUN,
    alert_annotation,
    base_dashboard,
    datasource_variable,
    label_variable,
    query,
    sel,
    stat_panel,
    table_panel,
    timeseries_panel,
)
from msdoctor.exporter import names

UID = "msdoctor-rank"
ONE = 'run="$run",rank="$rank"'
RUN_ONLY = 'run="$run"'
LEGEND = "rank {{rank}}"


def _q(short: str, legend: str = LEGEND, ref: str = "A"):
    return query(sel(short, ONE), legend=legend, ref=ref)


def _fleet_median(short: str, ref: str = "B"):
    return query(f"quantile(0.5, {sel(short, RUN_ONLY)})", legend="fleet median", ref=ref)


def _rate(short: str, legend: str, ref: str = "A"):
    return query(f"rate({sel(short, ONE)}[$__rate_interval])", legend=legend, ref=ref)


def _now_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Now"))
            .with_panel(stat_panel("Last step", "none", _q("last_step"), span=4, decimals=0))
            .with_panel(stat_panel("Loss", "none", _q("loss"), span=4))
            .with_panel(stat_panel("Tokens/s", "short", _q("device_tokens_per_second"), span=4))
            .with_panel(stat_panel("Step time", "s", _q("step_duration_seconds"), span=4))
            .with_panel(stat_panel("Data-wait share", "percentunit", _q("data_wait_ratio"),
                                   span=4))
            .with_panel(stat_panel("Seconds since last step", "s",
                                   query(f"time() - {sel('last_step_timestamp_seconds', ONE)}",
                                         legend=LEGEND),
                                   "Step events only (a hung process keeps heartbeating); the "
                                   "rank is stale after max(10 s, 10 median step times).",
                                   span=4)))


def _optimisation_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Optimisation"))
            .with_panel(timeseries_panel("Loss", "none", _q("loss"),
                                         query(f"quantile(0.5, {sel('loss', RUN_ONLY)})",
                                               legend="fleet median", ref="B")))
            .with_panel(timeseries_panel("Gradient norm", "none", _q("grad_norm")))
            .with_panel(timeseries_panel("Loss scale", "none", _q("loss_scale"), log_scale=True))
            .with_panel(timeseries_panel("Learning rate", "none", _q("learning_rate")))
            .with_panel(timeseries_panel("Update ratio |dw|/|w|", "none", _q("update_ratio"),
                                         description="Healthy training sits near 1e-3."))
            .with_panel(timeseries_panel(
                "Gradient norm per layer", "none",
                query(f"{names.LAYER_GRAD_NORM.name}{{{RUN_ONLY}}}", legend="{{layer}}"),
                description="Each layer's gradient norm, the largest over the run's ranks "
                            "(one series per layer; gaps are non-finite values). The layer of a "
                            "spike or a NaN is in the alerts' `layer` label.", log_scale=True))
            .with_panel(timeseries_panel("Overflow and non-finite steps", "short",
                                         _rate("overflow_steps_total", "overflow/s"),
                                         _rate("nonfinite_loss_steps_total",
                                               "non-finite loss/s", ref="B"))))


def _speed_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Speed"))
            .with_panel(timeseries_panel("Tokens/s on this device", "short",
                                         _q("device_tokens_per_second"),
                                         _fleet_median("device_tokens_per_second"),
                                         query(sel("run_expected_device_tokens_per_second",
                                                   RUN_ONLY), legend="expected", ref="C")))
            .with_panel(timeseries_panel("Step time", "s", _q("step_duration_seconds"),
                                         _fleet_median("step_duration_seconds"),
                                         _q("data_wait_seconds", legend="data wait", ref="C")))
            .with_panel(timeseries_panel("Data-wait share", "percentunit", _q("data_wait_ratio"),
                                         _fleet_median("data_wait_ratio")))
            .with_panel(timeseries_panel("Steps per second", "short",
                                         _rate("steps_total", "steps/s"))))


def _resources_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Memory and ingest"))
            .with_panel(timeseries_panel("Memory", "bytes",
                                         _q("device_memory_bytes", legend="device"),
                                         _q("device_memory_peak_bytes", legend="device peak",
                                            ref="B"),
                                         _q("host_resident_memory_bytes", legend="host RSS",
                                            ref="C")))
            .with_panel(timeseries_panel("Events", "short",
                                         _rate("events_ingested_total", "ingested/s"),
                                         _rate("decode_errors_total", "decode errors/s", ref="B"),
                                         _rate("hook_dropped_events_total", "dropped by hooks/s",
                                               ref="C")))
            .with_panel(table_panel("Alerts on this rank",
                                    query(f"{names.ALERT.name}{{{ONE}}}", legend="",
                                          instant=True, table_format=True),
                                    "Pending and firing msdoctor alerts for this rank.")))


def build() -> dashboard.Dashboard:
    """The rank drill-down dashboard."""
    d = (base_dashboard("msdoctor / Rank drill-down", UID,
                        "Every signal of one rank, against the fleet median.")
         .with_variable(datasource_variable())
         .with_variable(label_variable("run", "Run", names.LAST_STEP.name, multi=False))
         .with_variable(label_variable("rank", "Rank", f'{names.LAST_STEP.name}{{{RUN}}}',
                                       multi=False))
         .annotation(alert_annotation())
         .link(dashboard.DashboardLink("Fleet overview").type(DashboardLinkType.DASHBOARDS)
               .tags(["msdoctor"]).include_vars(True).keep_time(True).as_dropdown(False)))
    for row in (_now_row, _optimisation_row, _speed_row, _resources_row):
        d = row(d)
    return d

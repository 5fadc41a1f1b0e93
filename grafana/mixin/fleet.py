"""The fleet overview: every rank of every selected run on one page."""
from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard
from grafana_foundation_sdk.models.dashboard import DashboardLinkType

from grafana.mixin.common import (
    RUN,
    RUN_RANK,
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

UID = "msdoctor-fleet"
RANK_UID = "msdoctor-rank"


def _rate(short: str, selector: str = RUN_RANK) -> str:
    return f"sum by (run, rank) (rate({sel(short, selector)}[$__rate_interval]))"


def _summary_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Fleet"))
            .with_panel(stat_panel("Ranks reporting", "none",
                                   query(f"count({sel('last_step', RUN)})", legend="ranks"),
                                   "Ranks with a step in the sidecars' state.", span=3))
            .with_panel(stat_panel("World size", "none",
                                   query(f"max({sel('run_world_size', RUN)})", legend="world"),
                                   "Ranks the run was started with (run_start).", span=3))
            .with_panel(stat_panel("Sidecars reporting", "none",
                                   query(f"count({names.BUILD.sample_name})", legend="sidecars"),
                                   "msdoctor sidecars Prometheus scrapes successfully.", span=3))
            .with_panel(stat_panel("Slowest rank's step", "none",
                                   query(f"min({sel('last_step', RUN)})", legend="step"),
                                   "Lowest last step over the selected ranks.", span=3))
            .with_panel(stat_panel("Fleet throughput", "short",
                                   query(f"sum({sel('device_tokens_per_second', RUN)})",
                                         legend="tokens/s"),
                                   "Tokens per second over all selected ranks as of now: a "
                                   "stale or ended rank counts 0.", span=6))
            .with_panel(stat_panel("Slowest step time", "s",
                                   query(f"max({sel('step_duration_seconds', RUN)})",
                                         legend="max"),
                                   "The longest step time over the selected ranks (a stale "
                                   "rank's is the time since its last step).", span=6))
            .with_panel(stat_panel("Stale ranks", "none",
                                   query(f"sum({sel('rank_stale', RUN)}) or vector(0)",
                                         legend="stale"),
                                   "Running ranks with no step for max(10 s, 10 median step "
                                   "times); their tokens/s count 0.", span=6))
            .with_panel(stat_panel("Firing alerts", "none",
                                   query(f'count({names.ALERT.name}{{alertstate="firing",{RUN}}})'
                                         " or vector(0)", legend="firing"),
                                   "msdoctor alerts firing now.", span=6)))


def _training_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Training"))
            .with_panel(timeseries_panel("Loss per rank", "none", query(sel("loss")),
                                         description="Training loss at each rank's last step."))
            .with_panel(timeseries_panel("Gradient norm per rank", "none",
                                         query(sel("grad_norm")),
                                         description="Global gradient norm; spikes precede "
                                                     "loss spikes."))
            .with_panel(timeseries_panel("Loss scale per rank", "none", query(sel("loss_scale")),
                                         description="Dynamic loss scale; a falling scale means "
                                                     "repeated overflows.", log_scale=True))
            .with_panel(timeseries_panel("Overflow and non-finite steps", "short",
                                         query(_rate("overflow_steps_total"),
                                               legend="{{run}} rank {{rank}} overflow"),
                                         query(_rate("nonfinite_loss_steps_total"), ref="B",
                                               legend="{{run}} rank {{rank}} non-finite loss"),
                                         description="Per second; overflowed steps skip the "
                                                     "update.")))


def _throughput_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Throughput"))
            .with_panel(timeseries_panel(
                "Tokens/s per device", "short", query(sel("device_tokens_per_second")),
                query(f"max by (run) ({sel('run_expected_device_tokens_per_second', RUN)})",
                      legend="{{run}} expected", ref="B"),
                description="Per-device throughput against the run's expected baseline."))
            .with_panel(timeseries_panel(
                "Step time per rank", "s", query(sel("step_duration_seconds")),
                query(f"quantile by (run) (0.5, {sel('step_duration_seconds', RUN)})",
                      legend="{{run}} fleet median", ref="B"),
                description="A rank well above the fleet median is a straggler."))
            .with_panel(timeseries_panel(
                "Data-wait share per rank", "percentunit", query(sel("data_wait_ratio")),
                description="Share of each step spent waiting for input; above ~10% the input "
                            "pipeline is the bottleneck."))
            .with_panel(timeseries_panel(
                "Steps per second per rank", "short", query(_rate("steps_total")),
                description="Optimizer steps recorded per second.")))


def _memory_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Memory"))
            .with_panel(timeseries_panel(
                "Device memory per rank", "bytes", query(sel("device_memory_bytes")),
                query(sel("device_memory_peak_bytes"), legend="{{run}} rank {{rank}} peak",
                      ref="B"),
                description="Device memory in use and the reported peak."))
            .with_panel(timeseries_panel(
                "Host memory (RSS) per rank", "bytes", query(sel("host_resident_memory_bytes")),
                description="Resident memory of each training process; steady growth is a "
                            "host-side leak.")))


def _alerts_row(d: dashboard.Dashboard) -> dashboard.Dashboard:
    return (d.with_row(dashboard.Row("Alerts and sidecars"))
            .with_panel(table_panel(
                "Active msdoctor alerts",
                query(f"{names.ALERT.name}{{{RUN}}}", legend="", instant=True, table_format=True),
                "Pending and firing alerts; the TUI and Alertmanager show cause and fix."))
            .with_panel(timeseries_panel(
                "Hook drops and decode errors", "short",
                query(_rate("hook_dropped_events_total"), legend="{{run}} rank {{rank}} dropped"),
                query(_rate("decode_errors_total"), legend="{{run}} rank {{rank}} decode errors",
                      ref="B"),
                description="Events the hooks dropped and spool lines the sidecar rejected, "
                            "per second."))
            .with_panel(timeseries_panel(
                "Alert notifications", "short",
                query(f"sum by (receiver) (rate({names.NOTIFICATIONS.sample_name}"
                      "[$__rate_interval]))", legend="{{receiver}} delivered"),
                query(f"sum by (receiver) (rate({names.DELIVERY_FAILURES.sample_name}"
                      "[$__rate_interval]))", legend="{{receiver}} failed", ref="B"),
                description="Deliveries to Alertmanager and webhooks, per second.")))


def build() -> dashboard.Dashboard:
    """The fleet overview dashboard."""
    d = (base_dashboard("msdoctor / Fleet overview", UID,
                        "Health of every rank of a MindSpore training run, from msdoctor sidecars.")
         .with_variable(datasource_variable())
         .with_variable(label_variable("run", "Run", names.LAST_STEP.name, multi=True))
         .with_variable(label_variable("rank", "Rank", f'{names.LAST_STEP.name}{{{RUN}}}',
                                       multi=True))
         .annotation(alert_annotation())
         .link(dashboard.DashboardLink("Rank drill-down").type(DashboardLinkType.DASHBOARDS)
               .tags(["msdoctor"]).include_vars(True).keep_time(True).as_dropdown(False)))
    for row in (_summary_row, _training_row, _throughput_row, _memory_row, _alerts_row):
        d = row(d)
    return d

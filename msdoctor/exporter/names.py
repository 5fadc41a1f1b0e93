"""The metric-name table: every series ``/metrics`` exposes, named once.

The collector, the Grafana generator, the Prometheus fleet rules, the docs and
the tests all read this table, so a renamed metric cannot silently break a
dashboard. Names follow the Prometheus naming guide: the ``msdoctor_`` prefix,
base units spelled out at the end (``_seconds``, ``_bytes``, ``_ratio``) and
``_total`` on counters (prometheus_client appends it to counter families).

This module imports nothing beyond the standard library.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

PREFIX = "msdoctor_"

#: Labels that identify a training process: the run id and the rank.
RANK_LABELS: Tuple[str, ...] = ("run", "rank")


class MetricSpec(NamedTuple):
    """One exposed metric family."""

    name: str                    # family name; counters without the ``_total`` suffix
    kind: str                    # "gauge" | "counter" | "info"
    help: str
    source: Optional[str] = None  # the state signal or counter it reads, when per rank
    labels: Tuple[str, ...] = RANK_LABELS

    @property
    def sample_name(self) -> str:
        """The name a sample carries in the exposition (``_total`` added to counters)."""
        if self.kind == "counter":
            return self.name + "_total"
        if self.kind == "info":
            return self.name + "_info"
        return self.name


def _g(name: str, source: str, help_text: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, "gauge", help_text, source)


def _c(name: str, source: str, help_text: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, "counter", help_text, source)


#: Latest value per (run, rank) of a step signal (``source`` = signal name in the state).
RANK_GAUGES: Tuple[MetricSpec, ...] = (
    _g("loss", "loss", "Training loss at the rank's last recorded step."),
    _g("grad_norm", "grad_norm", "Global gradient norm at the last recorded step."),
    _g("loss_scale", "loss_scale", "Dynamic loss scale at the last recorded step."),
    _g("learning_rate", "lr", "Learning rate at the last recorded step."),
    _g("device_tokens_per_second", "tokens_per_s",
       "Tokens processed per second by this device as of now: the last step's rate while the "
       "rank steps, 0 once it is stale or has ended."),
    _g("step_duration_seconds", "step_time_s",
       "Wall time of the last step, from the previous step's end (includes the data wait); "
       "on a stale rank, the time since its last step."),
    _g("data_wait_seconds", "data_wait_s", "Time the last step waited for its input data."),
    _g("data_wait_ratio", "data_wait_share", "Share of the last step spent waiting for data."),
    _g("update_ratio", "update_ratio",
       "Relative parameter update |dw|/|w| at the last sampled step."),
    _g("device_memory_bytes", "mem_device_bytes", "Device memory in use at the last step."),
    _g("device_memory_peak_bytes", "mem_device_peak_bytes",
       "Peak device memory reported at the last step."),
    _g("host_resident_memory_bytes", "mem_host_rss_bytes",
       "Resident memory of the training process at the last step."),
)

#: Per (run, rank) gauges that are not step signals.
LAST_STEP = _g("last_step", "step", "Optimizer step number of the rank's last step event.")
LAST_EVENT_TIME = _g("last_event_timestamp_seconds", "event_t",
                     "Unix time of the rank's last event of any kind (heartbeats included).")
LAST_STEP_TIME = _g("last_step_timestamp_seconds", "step_t",
                    "Unix time of the rank's last step event (heartbeats do not count).")
RUNNING = _g("rank_running", "running",
             "1 while the rank has not ended its run (no run_end, not gone for good).")
STALE = _g("rank_stale", "stale",
           "1 while the rank runs but logged no step for max(10 s, 10 median step times).")

#: Per (run, rank) counters (``source`` = counter name in the state).
RANK_COUNTERS: Tuple[MetricSpec, ...] = (
    _c("steps", "steps", "Step events ingested."),
    _c("overflow_steps", "overflow_steps",
       "Steps whose gradients overflowed (the update was skipped by the loss scaler)."),
    _c("nonfinite_loss_steps", "nonfinite_losses", "Steps whose loss was NaN or infinite."),
    _c("events_ingested", "events", "Events of every type ingested from the rank's spool file."),
    _c("decode_errors", "decode_errors", "Spool lines that failed to decode or validate."),
    _c("hook_dropped_events", "dropped",
       "Events the training hooks dropped (queue full or write failure), from heartbeats."),
)

#: Per run.
RUN_WORLD_SIZE = MetricSpec(PREFIX + "run_world_size", "gauge",
                            "Number of ranks the run was started with (from run_start).",
                            "world_size", ("run",))
RUN_EXPECTED_TOKENS = MetricSpec(
    PREFIX + "run_expected_device_tokens_per_second", "gauge",
    "User-given baseline throughput per device (run_start.expect.tokens_per_s_per_device).",
    "tokens_per_s_per_device", ("run",))
RUN_EXPECTED_STEP_TIME = MetricSpec(
    PREFIX + "run_expected_step_duration_seconds", "gauge",
    "User-given baseline step time (run_start.expect.step_time_s).", "step_time_s", ("run",))

#: Goodput per run (``msdoctor.core.goodput``).
GOODPUT_RATIO = MetricSpec(PREFIX + "goodput_ratio", "gauge",
                           "Productive training time over wall time of the run (lowest rank).",
                           None, ("run",))
BADPUT = MetricSpec(PREFIX + "badput_seconds", "counter",
                    "Wall time of the run lost, by cause: startup, data_wait, checkpoint, hang, "
                    "downtime, redone, evaluation.", None, ("run", "cause"))

#: Per-layer gradient norms per run: each layer's latest value, the largest over the run's ranks (a
#: fault on any rank shows; one series per layer, not per rank and layer). At most
#: ``MAX_LAYER_SERIES`` layers per run, in forward order.
LAYER_GRAD_NORM = MetricSpec(PREFIX + "layer_grad_norm", "gauge",
                             "Gradient norm of each layer at the last step, the largest over the "
                             "run's ranks (NaN when a rank's is NaN).", "grad_norm",
                             ("run", "layer"))
MAX_LAYER_SERIES = 256

#: Alert state, shaped like Prometheus' own ``ALERTS`` series.
ALERT = MetricSpec(PREFIX + "alert", "gauge",
                   "1 for each pending or firing msdoctor alert (mirrors Prometheus' ALERTS).",
                   None, ("alertname", "alertstate", "severity", "run", "rank", "caused_by",
                          "layer", "first_rank"))

#: Delivery of alert transitions to Alertmanager / webhooks.
NOTIFICATIONS = MetricSpec(PREFIX + "alert_notifications", "counter",
                           "Alert notifications delivered, by receiver.", None, ("receiver",))
DELIVERY_FAILURES = MetricSpec(PREFIX + "alert_delivery_failures", "counter",
                               "Failed attempts to deliver alert notifications, by receiver.",
                               None, ("receiver",))
DELIVERY_DROPPED = MetricSpec(PREFIX + "alert_notifications_dropped", "counter",
                              "Alert notifications dropped (queue full or retries exhausted).",
                              None, ("receiver",))

#: Input refused at a bound (``--max-runs``): counted, never kept.
INGEST_REFUSED = MetricSpec(PREFIX + "ingest_refused_events", "counter",
                            "Spool events refused because their run id was one more than the "
                            "sidecar keeps (--max-runs).", None, ())

#: Pipeline metadata.
BUILD = MetricSpec(PREFIX + "build", "info", "msdoctor build information.", None,
                   ("version", "python_version"))

ALL: Tuple[MetricSpec, ...] = (
    RANK_GAUGES + (LAST_STEP, LAST_EVENT_TIME, LAST_STEP_TIME, RUNNING, STALE) + RANK_COUNTERS
    + (RUN_WORLD_SIZE, RUN_EXPECTED_TOKENS, RUN_EXPECTED_STEP_TIME, GOODPUT_RATIO, BADPUT,
       LAYER_GRAD_NORM, ALERT,
       NOTIFICATIONS, DELIVERY_FAILURES, DELIVERY_DROPPED, INGEST_REFUSED, BUILD)
)

#: sample name -> spec, for lookups by what a PromQL expression mentions.
BY_SAMPLE_NAME = {spec.sample_name: spec for spec in ALL}


def by_source(source: str) -> MetricSpec:
    """The per-rank gauge that exposes state signal ``source`` (``KeyError`` if none)."""
    for spec in RANK_GAUGES:
        if spec.source == source:
            return spec
    raise KeyError(f"no metric exposes signal {source!r}; known: "
                   f"{', '.join(s.source or '' for s in RANK_GAUGES)}")


def metric(short: str) -> str:
    """The full sample name for a short name: ``metric("loss") == "msdoctor_loss"``."""
    name = PREFIX + short
    if name not in BY_SAMPLE_NAME:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(sorted(BY_SAMPLE_NAME))}")
    return name

"""Read the sidecar's state at scrape time and turn it into metric families.

:func:`scrape_families` walks the :class:`~msdoctor.core.state.Store` once and
returns columnar :class:`Family` objects (label tuples + values), a handful of
Python operations per rank. :class:`StoreCollector` is the prometheus_client
custom collector over the same data (``registry.register(StoreCollector(...))``);
the HTTP server renders the families with :mod:`msdoctor.exporter.exposition`,
which produces the same text several times faster than ``generate_latest``.
"""
from __future__ import annotations

import platform
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple

import numpy as np
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from msdoctor import __version__
from msdoctor.core.layer_rows import LayerRows
from msdoctor.core.liveness import RATE_SIGNALS, gone_after, stale_step_time
from msdoctor.core.state import Store
from msdoctor.exporter import names
from msdoctor.exporter.names import MetricSpec

LabelValues = Tuple[str, ...]


@dataclass
class Family:
    """One metric family as columns: ``keys[i]`` are the label values of ``values[i]``."""

    spec: MetricSpec
    keys: List[LabelValues] = field(default_factory=list)
    values: List[float] = field(default_factory=list)

    def add(self, key: LabelValues, value: float) -> None:
        self.keys.append(key)
        self.values.append(value)


class AlertSource(Protocol):
    """What the collector needs from the alert set (:class:`msdoctor.core.alerts.active.ActiveAlerts`)."""

    def active(self) -> List[dict]: ...


class DeliveryStats(Protocol):
    """What the collector needs from a deliverer: ``receiver`` and ``stats`` counters."""

    receiver: str
    stats: dict


def _retry(fn: Callable[[], Any], attempts: int = 3) -> Any:
    """Run ``fn`` again when the ingest thread resized a dict under it (rare, harmless)."""
    for attempt in range(attempts):
        try:
            return fn()
        except RuntimeError:
            if attempt == attempts - 1:
                raise
    return None  # pragma: no cover


def scrape_families(store: Store, alerts: Optional[AlertSource] = None,
                      deliverers: Sequence[DeliveryStats] = (),
                      now: Optional[float] = None) -> List[Family]:
    """Every family ``/metrics`` exposes, read from ``store`` as of ``now`` (default: the
    wall clock), in :data:`names.ALL` order."""
    at = time.time() if now is None else float(now)
    return _retry(lambda: _families(store, alerts, deliverers, at))


def _families(store: Store, alerts: Optional[AlertSource],
              deliverers: Sequence[DeliveryStats], now: float) -> List[Family]:
    gauges = [Family(spec) for spec in names.RANK_GAUGES]
    sources = [(f.spec.source, f.keys.append, f.values.append) for f in gauges]
    last_step, last_event, running = (Family(names.LAST_STEP), Family(names.LAST_EVENT_TIME),
                                      Family(names.RUNNING))
    last_step_t, stale_family = Family(names.LAST_STEP_TIME), Family(names.STALE)
    counters = [Family(spec) for spec in names.RANK_COUNTERS]
    counter_sources = [(f.spec.source, f.keys.append, f.values.append) for f in counters]
    world = Family(names.RUN_WORLD_SIZE)
    exp_tokens, exp_step = Family(names.RUN_EXPECTED_TOKENS), Family(names.RUN_EXPECTED_STEP_TIME)
    ratio, badput = Family(names.GOODPUT_RATIO), Family(names.BADPUT)
    layer_families = [Family(names.LAYER_GRAD_NORM)]
    for run_state in list(store.runs.values()):
        run = run_state.run
        _layer_maxima(run, [s.layers for s in list(run_state.ranks.values())], layer_families)
        goodput = run_state.goodput
        if goodput.rank is not None:
            share = goodput.summary()["ratio"]
            if share is not None:
                ratio.add((run,), share)
            for cause, seconds in list(goodput.badput.items()):
                if cause != "other":
                    badput.add((run, cause), max(0.0, seconds))
        if run_state.world_size is not None:
            world.add((run,), float(run_state.world_size))
        _expected(run_state.expect, names.RUN_EXPECTED_TOKENS.source, run, exp_tokens)
        _expected(run_state.expect, names.RUN_EXPECTED_STEP_TIME.source, run, exp_step)
        gone = now - gone_after(run_state.expect)       # nothing read since then: gone
        for rank, state in sorted(list(run_state.ranks.items())):
            key = (run, str(rank))
            latest = state.latest
            heard, step_t = state.received, state.step_t
            live = state.status == "running" and (heard is None or heard >= gone)
            stale = live and step_t is not None and now - step_t > state.stale_limit
            if stale or not live:                  # rates as of now (core.liveness)
                latest = dict(latest)
                for name in RATE_SIGNALS:
                    if name in latest:
                        latest[name] = 0.0
                if stale and "step_time_s" in latest:
                    latest["step_time_s"] = stale_step_time(latest["step_time_s"],
                                                            now - (step_t or now))
            for source, add_key, add_value in sources:
                value = latest.get(source)
                if value is not None:
                    add_key(key)
                    add_value(value)
            if state.last_step is not None:
                last_step.add(key, float(state.last_step))
            if state.t is not None:
                last_event.add(key, float(state.t))
            if step_t is not None:
                last_step_t.add(key, float(step_t))
            running.add(key, 1.0 if live else 0.0)
            stale_family.add(key, 1.0 if stale else 0.0)
            c = state.counters
            for source, add_key, add_value in counter_sources:
                add_key(key)
                add_value(c.get(source, 0))
    alert = Family(names.ALERT)
    if alerts is not None:
        for a in alerts.active():
            rank, where = a.get("rank"), a.get("labels") or {}
            alert.add((str(a.get("alert", "")), str(a.get("state", "")),
                       str(a.get("severity", "")), str(a.get("run", "")),
                       "" if rank is None else str(rank), str(a.get("caused_by") or ""),
                       str(where.get("layer") or ""), str(where.get("first_rank") or "")), 1.0)
    delivered, failed, dropped = (Family(names.NOTIFICATIONS), Family(names.DELIVERY_FAILURES),
                                  Family(names.DELIVERY_DROPPED))
    for d in deliverers:
        stats = d.stats
        delivered.add((d.receiver,), float(stats.get("sent", 0)))
        failed.add((d.receiver,), float(stats.get("failed", 0)))
        dropped.add((d.receiver,), float(stats.get("dropped", 0)))
    refused = Family(names.INGEST_REFUSED, [()], [float(store.run_limit.refused_events)])
    build = Family(names.BUILD, [(__version__, platform.python_version())], [1.0])
    return [*gauges, last_step, last_event, last_step_t, running, stale_family, *counters, world,
            exp_tokens, exp_step, ratio, badput, *layer_families, alert, delivered, failed, dropped, refused, build]


def _layer_maxima(run: str, books: Sequence[Optional[LayerRows]],
                  families: Sequence[Family]) -> None:
    """Each layer's latest value, the largest over the ranks (NaN wins: np.maximum), for the
    first :data:`names.MAX_LAYER_SERIES` layers of the ranks' newest layer names."""
    newest = [b for b in books if b is not None and b.rows]
    if not newest:
        return
    layer_names = newest[0].names[:names.MAX_LAYER_SERIES]
    width = len(layer_names)
    for family in families:
        top = np.full(width, -np.inf)
        for book in newest:
            row = book.rows[-1]
            values = row.values.get(family.spec.source or "")
            if book.names[:width] != layer_names or values is None:
                continue
            known = row.measured[family.spec.source or ""]
            values = values[:width].astype(np.float64)
            if known is not None:
                values = np.where(known[:width], values, -np.inf)
            top = np.maximum(top, values)
        for layer, value in zip(layer_names, top.tolist()):
            if value != -np.inf:
                family.add((run, layer), value)


def _expected(expect: dict, key: Optional[str], run: str, family: Family) -> None:
    value = expect.get(key) if key else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        family.add((run,), float(value))


def to_metric(family: Family) -> Metric:
    """A prometheus_client metric family with the same samples."""
    spec = family.spec
    labels = list(spec.labels)
    if spec.kind == "counter":
        metric: Metric = CounterMetricFamily(spec.name, spec.help, labels=labels)
    elif spec.kind == "info":
        metric = InfoMetricFamily(spec.name, spec.help, labels=[])
        for key in family.keys:
            metric.add_metric([], dict(zip(labels, key)))
        return metric
    else:
        metric = GaugeMetricFamily(spec.name, spec.help, labels=labels)
    for key, value in zip(family.keys, family.values):
        metric.add_metric(list(key), value)
    return metric


class StoreCollector:
    """prometheus_client collector over a sidecar's store, alert feed and deliverers.

    >>> registry = CollectorRegistry(auto_describe=False)
    >>> registry.register(StoreCollector(sidecar.store, feed))
    >>> generate_latest(registry)
    """

    def __init__(self, store: Store, alerts: Optional[AlertSource] = None,
                 deliverers: Iterable[DeliveryStats] = (),
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.alerts = alerts
        self.deliverers = list(deliverers)
        self.clock = clock

    def families(self) -> List[Family]:
        """The columnar families (what the fast exposition renders), as of the clock."""
        return scrape_families(self.store, self.alerts, self.deliverers, self.clock())

    def collect(self) -> Iterator[Metric]:
        """Yield every family, read fresh from the state."""
        for family in self.families():
            yield to_metric(family)

"""Anomaly injectors for the synthetic runs of :mod:`synthetic`, one per shipped alert.

Each injector edits the full-resolution (every step) per-rank series of a healthy run
from step ``t0`` on (index ``t0 - 1``) and returns the :class:`Label` the scorer
checks against. The shapes follow the field knowledge in DIAGNOSIS-GUIDE.md: a NaN
that poisons every later step, a plateau at the level reached, decaying spikes, spikes
at a fixed data-order period, an oscillation after the initial decrease, recurring
gradient-norm spikes, a loss scale pinned low or collapsing under repeated overflow, a
starved input pipeline, a slower device, a leak, a hang with the process still alive, one
slow rank, and a step counter that counts micro-batches.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from synthetic import Label, Spec, ar1

Series = Dict[int, Dict[str, np.ndarray]]


def _aligned(step: int, k: int) -> int:
    """The first step at or after ``step`` that a log recording every ``k``-th step shows."""
    return int(math.ceil(step / k) * k)


def _flatten_loss(m, full: Series, i: int) -> None:
    """From index i on, the loss stays at the level it had reached (noise kept)."""
    level = m.curve[i]
    for cols in full.values():
        cols["loss"][i:] *= level / m.curve[i:]


def loss_nonfinite(m, full: Series, spec: Spec, i: int) -> Label:
    rank = int(m.rng.integers(spec.world_size))
    bad = np.nan if m.rng.random() < 0.7 else np.inf
    full[rank]["loss"][i] = bad
    for cols in full.values():
        cols["loss"][i + 1:] = np.nan
        cols["grad_norm"][i:] = np.nan
    return Label("LossNonFinite", spec.t0, rank)


def grad_nonfinite(m, full: Series, spec: Spec, i: int) -> Label:
    once = m.rng.random() < 0.5            # one skipped step, or NaN weights from here on
    bad = np.nan if m.rng.random() < 0.5 else np.inf
    for cols in full.values():
        if once:
            cols["grad_norm"][i] = bad
        else:
            cols["grad_norm"][i:] = bad
            cols["loss"][i + 1:] = np.nan
        if "overflow" in cols:                 # not an fp16 overflow: nothing flagged it
            cols["overflow"][i:i + 1 if once else None] = 0.0
    return Label("GradNormNonFinite", spec.t0)


def loss_plateau(m, full: Series, spec: Spec, i: int) -> Label:
    _flatten_loss(m, full, i)
    return Label("LossPlateau", spec.t0)


def _spike_shape(n: int, start: int, magnitude: float, tau: float) -> np.ndarray:
    out = np.zeros(n)
    k = np.arange(n - start, dtype=np.float64)
    out[start:] = magnitude * np.exp(-k / tau)
    return out


def loss_spike(m, full: Series, spec: Spec, i: int) -> Label:
    rng = m.rng
    magnitude = max(rng.uniform(0.3, 1.5), 12 * spec.noise)    # clearly above the noise
    shape = _spike_shape(spec.steps, i, magnitude,
                         rng.uniform(max(10, 2 * spec.log_every), 200))
    for cols in full.values():
        cols["loss"] *= 1 + shape
    return Label("LossSpike", spec.t0)


def loss_spikes_periodic(m, full: Series, spec: Spec, i: int) -> Label:
    rng = m.rng
    period = int(spec.extra.get("period") or rng.integers(200, 1200))
    magnitude = max(0.15, spec.noise * rng.uniform(10, 20))     # visible: 10-20x the noise
    tau = rng.uniform(max(3, 2 * spec.log_every), max(10, 4 * spec.log_every))
    shape = np.zeros(spec.steps)
    for start in range(i, spec.steps, period):
        shape += _spike_shape(spec.steps, start, magnitude, tau)
    for cols in full.values():
        cols["loss"] *= 1 + shape
    return Label("LossSpikesPeriodic", spec.t0, period=period)


def loss_oscillating(m, full: Series, spec: Spec, i: int) -> Label:
    rng, n = m.rng, spec.steps - i
    amplitude = rng.uniform(0.2, 0.5)
    if rng.random() < 0.5:
        wave = math.sqrt(2) * np.sin(2 * math.pi * np.arange(n) / rng.uniform(40, 400))
    else:
        phi = math.exp(-1 / rng.uniform(10, 100))
        wave = ar1(rng.normal(0, math.sqrt(1 - phi * phi), n), phi, rng.normal())
    _flatten_loss(m, full, i)
    for cols in full.values():
        cols["loss"][i:] *= np.maximum(0.3, 1 + amplitude * wave)
    return Label("LossOscillating", spec.t0)


def updates_stalled(m, full: Series, spec: Spec, i: int) -> Label:
    if spec.extra.get("variant", "ratio") == "repeat":
        for cols in full.values():    # same batch, same weights: the very same loss each step
            cols["loss"][i:] = float(np.float32(cols["loss"][i]))
            cols["update_ratio"][:] = np.nan
    else:
        _flatten_loss(m, full, i)
        for cols in full.values():
            sampled = ~np.isnan(cols["update_ratio"][i:])
            cols["update_ratio"][i:][sampled] = m.rng.uniform(0, 1e-9, int(sampled.sum()))
    return Label("UpdatesStalled", spec.t0)


def grad_norm_spike(m, full: Series, spec: Spec, i: int) -> Label:
    rng = m.rng
    length = int(rng.integers(1, 6))
    factor = rng.uniform(5, 50)
    for cols in full.values():
        cols["grad_norm"][i:i + length] = np.where(np.isfinite(cols["grad_norm"][i:i + length]),
                                                   cols["grad_norm"][i:i + length], m.grad_floor)
        cols["grad_norm"][i:i + length] *= factor
        if "overflow" in cols:
            cols["overflow"][i:i + length] = 0.0
    return Label("GradNormSpike", spec.t0)


def grad_norm_spikes_recurring(m, full: Series, spec: Spec, i: int) -> Label:
    """An unstable optimizer: a 1-3 step gradient-norm spike every 40-120 steps from t0 on
    (on logged steps: a sparse log shows the spikes that land on it)."""
    rng, k = m.rng, spec.log_every
    n = next(iter(full.values()))["grad_norm"].shape[0]
    step = spec.t0
    while step <= n:
        start = _aligned(step, k) - 1
        length = int(rng.integers(1, 4))
        factor = rng.uniform(5, 30)
        for cols in full.values():
            g = cols["grad_norm"][start:start + length]
            g[:] = np.where(np.isfinite(g), g, m.grad_floor) * factor
            if "overflow" in cols:
                cols["overflow"][start:start + length] = 0.0
        step += int(rng.integers(40, 121))
    return Label("GradNormSpikesRecurring", spec.t0)


def loss_scale_stuck(m, full: Series, spec: Spec, i: int) -> Label:
    value = float(2 ** int(m.rng.integers(1, 9)))    # far too small: gradients underflow
    _flatten_loss(m, full, i)
    for cols in full.values():
        cols["loss_scale"][i:] = value
        cols["overflow"][i:] = 0.0
        cols["grad_norm"][i:] = np.where(np.isfinite(cols["grad_norm"][i:]),
                                         cols["grad_norm"][i:], m.grad_floor)
    return Label("LossScaleStuck", spec.t0)


def loss_scale_collapse(m, full: Series, spec: Spec, i: int) -> Label:
    rate = m.rng.uniform(0.5, 1.0)
    draws = m.rng.random(spec.steps)
    cols0 = full[0]
    value = cols0["loss_scale"][i]
    scale, overflow = cols0["loss_scale"].copy(), cols0["overflow"].copy()
    for j in range(i, spec.steps):
        scale[j] = value
        overflow[j] = 1.0 if draws[j] < rate else 0.0
        if overflow[j]:
            value = max(value / 2, 1.0)
    _flatten_loss(m, full, i)                # skipped updates: no progress
    for cols in full.values():
        cols["loss_scale"][:] = scale
        cols["overflow"][:] = overflow
        cols["grad_norm"][i:][overflow[i:] > 0] = np.inf
    first = i + int(np.argmax(overflow[i:] > 0))
    return Label("LossScaleCollapse", _aligned(first + 1, spec.log_every))


def dataloader_starved(m, full: Series, spec: Spec, i: int) -> Label:
    rng = m.rng
    extra = m.base_time * rng.uniform(0.4, 3.0)
    for cols in full.values():
        wait = extra * np.exp(rng.normal(0, 0.3, spec.steps - i))
        cols["data_wait_s"][i:] += wait
        cols["step_time_s"][i:] += wait
    return Label("DataLoaderStarved", spec.t0)


def throughput_below(m, full: Series, spec: Spec, i: int) -> Label:
    factor = m.rng.uniform(1.6, 3.0)
    for cols in full.values():
        compute = cols["step_time_s"][i:] - cols["data_wait_s"][i:]
        cols["step_time_s"][i:] += compute * (factor - 1)
    return Label("ThroughputBelowBaseline", spec.t0)


def memory_growth(m, full: Series, spec: Spec, i: int) -> Label:
    rate = m.rng.uniform(0.04, 0.3)                  # fraction of the level per 1000 steps
    ramp = np.arange(spec.steps - i, dtype=np.float64) * rate / 1000
    name = "mem_device_bytes" if spec.device and m.rng.random() < 0.5 else "mem_host_rss_bytes"
    for cols in full.values():
        level = float(np.median(cols[name][max(0, i - 200):i]))
        cols[name][i:] += level * ramp
        if name == "mem_device_bytes":
            cols["mem_device_peak_bytes"][i:] = np.maximum.accumulate(
                np.maximum(cols["mem_device_peak_bytes"][i:], cols[name][i:]))
    return Label("MemoryGrowth", spec.t0)


def memory_near_capacity(m, full: Series, spec: Spec, i: int) -> Label:
    rng = m.rng
    for cols in full.values():
        if spec.device:
            peak = m.capacity * rng.uniform(0.965, 0.995)
            cols["mem_device_peak_bytes"][i:] = peak
            cols["mem_device_bytes"][i:] = np.minimum(cols["mem_device_bytes"][i:], peak)
        else:
            cols["mem_host_rss_bytes"][i:] = m.host_total * rng.uniform(0.93, 0.98)
    return Label("MemoryNearCapacity", spec.t0)


def straggler(m, full: Series, spec: Spec, i: int) -> Label:
    rank = int(m.rng.integers(spec.world_size))
    factor = m.rng.uniform(1.5, 2.5)
    cols = full[rank]
    compute = cols["step_time_s"][i:] - cols["data_wait_s"][i:]
    cols["step_time_s"][i:] += compute * (factor - 1)
    return Label("StragglerRank", spec.t0, rank)


def step_count_mismatch(m, full: Series, spec: Spec, i: int) -> Label:
    # the logged counter advances once per micro-batch: a "step" is 1/grad_accum of an update
    record = m.rng.random() < 0.5
    for cols in full.values():
        cols["tokens"][:] /= spec.grad_accum
        cols["step_time_s"][:] = np.maximum(cols["step_time_s"] / spec.grad_accum, 1e-3)
        cols["data_wait_s"][:] /= spec.grad_accum
        if record:
            cols["micro_steps"][:] = 1.0
        else:
            cols.pop("micro_steps", None)
    return Label("StepCountMismatch", _aligned(1, spec.log_every))


def job_hung(m, full: Series, spec: Spec, i: int) -> Label:
    return Label("JobHung", _aligned(i, spec.log_every))


INJECTORS: Dict[str, Callable] = {
    "LossNonFinite": loss_nonfinite,
    "GradNormNonFinite": grad_nonfinite,
    "LossPlateau": loss_plateau,
    "LossSpike": loss_spike,
    "LossSpikesPeriodic": loss_spikes_periodic,
    "LossOscillating": loss_oscillating,
    "UpdatesStalled": updates_stalled,
    "GradNormSpike": grad_norm_spike,
    "GradNormSpikesRecurring": grad_norm_spikes_recurring,
    "LossScaleStuck": loss_scale_stuck,
    "LossScaleCollapse": loss_scale_collapse,
    "DataLoaderStarved": dataloader_starved,
    "ThroughputBelowBaseline": throughput_below,
    "MemoryGrowth": memory_growth,
    "MemoryNearCapacity": memory_near_capacity,
    "JobHung": job_hung,
    "StragglerRank": straggler,
    "StepCountMismatch": step_count_mismatch,
}


def inject(m, full: Series, spec: Spec) -> Tuple[Label, Optional[int]]:
    """Inject ``spec.anomaly`` at ``spec.t0``; returns (label, step after which steps stop)."""
    injector = INJECTORS.get(spec.anomaly)
    if injector is None:
        raise ValueError(f"unknown anomaly {spec.anomaly!r}: expected one of {', '.join(INJECTORS)}")
    label = injector(m, full, spec, spec.t0 - 1)
    hang_at = spec.t0 if spec.anomaly == "JobHung" else None
    return label, hang_at

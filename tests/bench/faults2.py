"""Faults injected into the healthy runs of ``generator2.py``, each with its onset labelled.

A fault changes a run's records from its onset record on (for every rank, or for the one
rank it names); everything before the onset is left exactly as the healthy run had it, so
the twin generated without the fault is identical up to the onset (checked by
``tests/msdoctor/test_detection_generator2.py``). Onsets are early (steps 20-100 of a dense
log, records 10-20 of a sparse one, 6-10 of an epoch log) or late (past the first third).

:data:`KINDS` says for each fault which alerts diagnose it (a regular expression over alert
names, so a rule renamed or added for it counts) and the delay the issue asks for, in steps
on dense logs and in records on sparse ones (JobHung: seconds after the last step). A
plateau's label also carries :func:`oracle_z`, how detectable it is within that target at
best (from the generator's noise-free curves and noise alone).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from generator2 import GB, Run, Shape, Table, generate, sync_clocks, with_steps

LR = r".*(LearningRate|Lr[A-Z]|LR[A-Z]|Lr$|LR$).*"


@dataclass(frozen=True)
class Kind:
    """A fault: how it is diagnosed, how fast, and where it can be injected."""

    name: str
    alerts: str                        # regular expression of the alerts that diagnose it
    horizon: int                       # records the run goes on after the onset
    target: str = ""                   # the delay target, in words ("" = none)
    families: Tuple[str, ...] = ("llm", "exp", "noisy", "nearzero")
    loggings: Tuple[str, ...] = ("dense", "every5", "dense", "every10", "every100", "epoch")
    precision: str = "bf16"
    multi: bool = False                # needs two ranks or more
    signal: str = "loss"               # the signal the fault changes at its onset


KINDS: Dict[str, Kind] = {k.name: k for k in (
    Kind("loss_nonfinite", "LossNonFinite", 30, "0"),
    Kind("grad_nonfinite", "GradNormNonFinite", 30, "0", signal="grad_norm"),
    Kind("loss_spike", "LossSpike", 60, "0"),
    Kind("updates_stalled", "UpdatesStalled", 120, "20", signal="update_ratio",
         loggings=("dense", "every5", "dense", "every10", "every100")),
    Kind("lr_zero", r"UpdatesStalled|" + LR, 120, "20", signal="lr"),
    Kind("lr_tiny", LR, 60, "1", signal="lr"),
    Kind("lr_huge", LR, 60, "1", signal="lr"),
    Kind("loss_scale_collapse", "LossScaleCollapse", 120, "20", precision="fp16",
         signal="loss_scale"),
    Kind("data_starvation", "DataLoaderStarved", 250, "50", signal="data_wait_s"),
    Kind("throughput_drop", "ThroughputBelowBaseline", 400, "100", signal="step_time_s"),
    Kind("plateau", "LossPlateau", 0, "max(300, 10% of onset step)", families=("llm",)),
    Kind("periodic_spikes", "LossSpikesPeriodic", 0, "3 periods",
         loggings=("dense", "every5", "dense", "every10", "every100")),
    Kind("memory_growth", "MemoryGrowth", 0, "before +10 %", signal="mem_host_rss_bytes"),
    Kind("grad_spikes_recurring", "GradNormSpikesRecurring", 1200, signal="grad_norm",
         loggings=("dense", "every5", "dense", "every10")),
    Kind("loss_oscillating", "LossOscillating", 1200,
         loggings=("dense", "every5", "dense", "every10")),
    Kind("straggler", "StragglerRank", 600, multi=True, signal="step_time_s",
         loggings=("dense", "every10")),
    Kind("memory_capacity", "MemoryNearCapacity", 60, signal="mem_device_bytes"),
    Kind("job_hung", "JobHung", 0, "limit + 60 s", loggings=("dense",), signal="step"),
)}


@dataclass
class Label:
    """Where a fault begins and what counts as catching it."""

    kind: str
    onset_step: int
    onset_record: int                  # row of the onset in the affected rank's table
    rank: Optional[int]                # None: every rank
    target: Optional[float]            # delay target (unit below), None: no target
    unit: str                          # steps | records | seconds
    timing: str                        # early | late
    period: int = 0                    # periodic spikes: steps between spikes
    grow_steps: int = 0                # memory growth: steps to grow 10 %
    hang_t: float = math.nan           # JobHung: time of the last step
    oracle_z: float = math.nan         # plateau: separation within the target (oracle_z())


# -- choosing the run and its onset ---------------------------------------------------------

def _horizon(kind: Kind, rng: np.random.Generator, onset: int, every: int) -> Tuple[int, dict]:
    """Records after the onset, plus parameters drawn for the fault."""
    extra: dict = {}
    if kind.name == "plateau":             # the target counts records on sparse logs
        return int(2.5 * max(300, 0.1 * onset)) + 5, extra
    if kind.name == "periodic_spikes":
        records = int(rng.integers(5, 201)) if every == 1 else int(rng.integers(3, 16))
        extra["period"] = records * every
        return 8 * records + 10, extra
    if kind.name == "memory_growth":
        records = int(rng.integers(150, 3000)) if every == 1 else int(rng.integers(8, 120))
        extra["grow_records"] = records
        return 2 * records + 10, extra
    if kind.name == "job_hung":
        return 5, extra
    return kind.horizon, extra


def plan(kind: Kind, seed: int, index: int) -> Tuple[Shape, dict]:
    """The shape of the ``index``-th run of ``kind`` and where its fault begins."""
    rng = np.random.default_rng([seed, 61, index, zlib.crc32(kind.name.encode())])
    logging = kind.loggings[(index // 2) % len(kind.loggings)]
    timing = "early" if index % 2 == 0 else "late"
    family = kind.families[int(rng.integers(len(kind.families)))]
    every = 1 if logging == "dense" else {"every5": 5, "every10": 10, "every100": 100}.get(
        logging, int(rng.integers(20, 500)))
    if logging == "epoch":
        total = int(rng.integers(15, 61))
        onset_rec = int(rng.integers(6, 11)) if timing == "early" else int(
            rng.integers(int(0.6 * total), int(0.8 * total) + 1))
        horizon, extra = total - onset_rec - 1, {}
        if kind.name == "memory_growth":
            extra["grow_records"] = int(rng.integers(4, 12))
    else:
        if logging == "dense":
            onset_step = int(rng.integers(20, 101)) if timing == "early" else int(
                rng.integers(1000, 8001) if kind.name != "plateau" else rng.integers(3000, 15001))
            onset_rec = onset_step - 1
        else:
            onset_rec = int(rng.integers(10, 21)) if timing == "early" else int(
                rng.integers(40, 151))
        horizon, extra = _horizon(kind, rng, (onset_rec + 1) * every, every)
        total = onset_rec + 1 + horizon
    world = 1
    if kind.multi or (kind.name in ("data_starvation", "memory_growth", "throughput_drop",
                                    "loss_nonfinite") and rng.random() < 0.3):
        world = int(rng.choice([2, 4]))
    precision = kind.precision if kind.precision == "fp16" else (
        "fp16" if kind.name in ("loss_spike", "plateau", "data_starvation") and
        rng.random() < 0.25 else "bf16")
    onset_step = (onset_rec + 1) * every
    shape = Shape(seed=int(rng.integers(1, 2 ** 31)), family=family, steps=total * every,
                  logging=logging, world_size=world, precision=precision,
                  ratio_every=int(rng.choice([1, 10])) if kind.name == "updates_stalled"
                  else int(rng.choice([0, 1, 10])),
                  epoch_len=every if logging == "epoch" else 100)
    if kind.name.startswith("lr_"):     # the fault comes after the warm-up
        shape = replace(shape, warmup=max(1, int(onset_step * rng.uniform(0.1, 0.5))))
    if kind.name == "updates_stalled" and logging == "dense" and shape.ratio_every > 1:
        onset_rec = (onset_step + shape.ratio_every - 1) // shape.ratio_every \
            * shape.ratio_every - 1     # a sampled step
        shape = with_steps(shape, max(shape.steps, onset_rec + 1 + horizon))
    extra.update(timing=timing, onset_rec=onset_rec, draw=int(rng.integers(2 ** 31)))
    return shape, extra


# -- injecting ------------------------------------------------------------------------------

def _flatten(table: Table, o: int) -> None:
    """The loss stops falling at row ``o``: it keeps the level of the row before, its noise
    goes on."""
    loss, level = table.cols["loss"], table.trend[max(0, o - 1)]
    loss[o:] = level + (loss[o:] - table.trend[o:]) * (level / table.trend[o:])


def oracle_z(table: Table, o: int, rows: int) -> float:
    """How far a plateau from row ``o`` is from the healthy run by row ``o + rows`` (the
    last row on time), in noise standard deviations: the best any detector could do.

    Over the rows W = o .. o + rows (clipped to the table), the flattened run's noise-free
    loss is ``trend[o - 1]`` (see :func:`_flatten`) and the healthy one's is ``trend[i]``;
    with d_i their difference and sd_i the healthy loss noise of row i (``Table.sd``: the sd
    of the recorded value, i.e. of the epoch's mean on epoch logs), the likelihood-ratio
    test of the two known mean curves under independent Gaussian noise (Neyman-Pearson)
    separates them by z = sqrt(sum_i (d_i / sd_i)^2). Only the generator's own noise-free
    curves and noise enter, never a rule's output.

    Approximations: the flattened run's noise is the healthy noise times level / trend_i
    (a few per cent more within the target; the healthy sd is used, as a test calibrated on
    the healthy run would); the ``noisy`` (log-normal) and ``nearzero`` (gamma) families are
    not Gaussian, their marginal sd is used anyway (the plateau is injected into ``llm``
    runs only, whose noise is Gaussian, additive and independent from step to step; on
    epoch logs the mean of an epoch, whose sd is ``Table.sd``)."""
    level = float(table.trend[max(0, o - 1)])
    window = slice(o, min(len(table), o + rows + 1))
    d = level - table.trend[window]
    return float(math.sqrt(float(np.sum((d / table.sd[window]) ** 2))))


def _slow_down(table: Table, o: int, factor: np.ndarray | float) -> None:
    """Step time multiplied by ``factor`` from row ``o``; the wall clock follows."""
    dt = np.diff(table.t, prepend=table.t[0])
    dt[o:] *= factor
    table.t = table.t[0] + np.cumsum(dt)


def _inject(kind: str, table: Table, o: int, rng: np.random.Generator, run: Run,
            extra: dict) -> None:
    """Change ``table`` from row ``o`` as fault ``kind`` would."""
    c, n, every = table.cols, len(table), run.shape.every
    lr_max = run.facts["lr_max"]
    if kind == "loss_nonfinite":
        c["loss"][o:] = math.nan if rng.random() < 0.6 else math.inf
        c["grad_norm"][o:] = math.nan
    elif kind == "grad_nonfinite":
        c["grad_norm"][o] = math.inf if rng.random() < 0.5 else math.nan
        if rng.random() < 0.5:          # applied: the weights are NaN from the next step
            c["grad_norm"][o + 1:] = math.nan
            c["loss"][o + 1:] = math.nan
    elif kind == "loss_spike":
        peak = table.trend[o] * rng.uniform(1.5, 3.0) + 12 * table.sd[o]
        decay = rng.choice([0.0, 0.0, 2.0, 6.0])        # records to recover (1/e)
        ahead = np.arange(n - o)
        bump = (peak - table.trend[o]) * (np.exp(-ahead / decay) if decay else ahead == 0)
        c["loss"][o:] = np.maximum(c["loss"][o:], table.trend[o:] + bump)
        c["grad_norm"][o] *= rng.uniform(3, 10)
    elif kind in ("updates_stalled", "lr_zero", "lr_tiny"):
        if kind == "lr_zero":
            c["lr"][o:] = 0.0
        elif kind == "lr_tiny":
            c["lr"][o:] = 10 ** rng.uniform(-13, -10)
        if "update_ratio" in c:
            c["update_ratio"][o:] = c["lr"][o:] * run.facts["ratio_gain"] if kind != \
                "updates_stalled" else 0.0
        _flatten(table, o)
    elif kind == "lr_huge":
        c["lr"][o:] = max(1.0, lr_max * 1000) * rng.uniform(1, 30)
        if "update_ratio" in c:
            c["update_ratio"][o:] = rng.uniform(0.1, 1.0)
        ahead = np.arange(n - o)
        start = float(table.trend[0])
        c["loss"][o:] += (start - table.trend[o:]) * (1 - np.exp(-ahead / 5.0)) * 0.8
        c["grad_norm"][o:] *= rng.uniform(10, 100)
    elif kind == "loss_scale_collapse":
        floor = run.facts["scale_unit"]
        c["overflow"][o:] = 1.0
        before = c["loss_scale"][o - 1] if o else c["loss_scale"][0]
        c["loss_scale"][o:] = np.maximum(floor, before / 2.0 ** np.arange(1, n - o + 1))
        _flatten(table, o)
    elif kind in ("data_starvation", "throughput_drop"):
        if kind == "data_starvation":
            share = rng.uniform(0.3, 0.7)
            compute = c["step_time_s"][o:] - c["data_wait_s"][o:]
            new_time = compute / (1 - share)
            c["data_wait_s"][o:] = share * new_time
        else:
            new_time = c["step_time_s"][o:] * rng.uniform(1.6, 3.0)
        factor = new_time / c["step_time_s"][o:]
        c["step_time_s"][o:] = new_time
        _slow_down(table, o, factor)
    elif kind == "plateau":
        _flatten(table, o)
    elif kind == "periodic_spikes":
        hit = np.arange(o, n, extra["period"] // every)
        c["loss"][hit] = table.trend[hit] * (1 + rng.uniform(0.4, 1.0)) + 8 * table.sd[hit]
        c["grad_norm"][hit] *= rng.uniform(2, 5)
    elif kind == "memory_growth":
        level = float(np.median(c["mem_host_rss_bytes"][max(0, o - 20):o + 1]))
        ahead = (table.step[o:] - table.step[o] + every).astype(float)
        c["mem_host_rss_bytes"][o:] += 0.1 * level * ahead / (extra["grow_records"] * every)
    elif kind == "grad_spikes_recurring":
        hit = np.flatnonzero(rng.random(n - o) < 1 / rng.uniform(25, 80)) + o
        hit = np.unique(np.concatenate([[o], hit]))
        c["grad_norm"][hit] *= rng.uniform(6, 20, hit.shape[0])
    elif kind == "loss_oscillating":
        period = rng.uniform(60, 300) / every
        swing = rng.uniform(0.2, 0.4) * table.trend[o:]
        c["loss"][o:] += swing * np.sin(2 * math.pi * np.arange(1, n - o + 1) / period)
    elif kind == "straggler":
        factor = rng.uniform(1.3, 2.0)
        c["step_time_s"][o:] *= factor
        _slow_down(table, o, factor)
    elif kind == "memory_capacity":
        capacity = run.config["mem_device_capacity_bytes"]
        c["mem_device_bytes"][o:] = capacity * rng.uniform(0.96, 0.99)
        c["mem_device_peak_bytes"][o:] = np.maximum(c["mem_device_peak_bytes"][o:],
                                                    c["mem_device_bytes"][o:])
    elif kind != "job_hung":            # a hung job's records are cut by the caller
        raise ValueError(f"unknown fault {kind!r}")


def _truncate(table: Table, rows: int) -> None:
    """Keep the first ``rows`` records (a hung job logs nothing after its last step)."""
    table.step, table.t = table.step[:rows], table.t[:rows]
    table.cols = {k: v[:rows] for k, v in table.cols.items()}
    table.present = {k: v[:rows] for k, v in table.present.items()}
    table.trend, table.sd = table.trend[:rows], table.sd[:rows]


def faulty(kind_name: str, seed: int, index: int) -> Run:
    """The ``index``-th labelled run of fault ``kind_name``."""
    kind = KINDS[kind_name]
    shape, extra = plan(kind, seed, index)
    run = generate(shape, run_id=f"{kind_name}-{extra['timing']}-{shape.logging}-{seed}-{index}")
    rng = np.random.default_rng([seed, 67, index, extra["draw"]])
    o = extra["onset_rec"]
    ranks = [None] if kind.name not in ("data_starvation", "memory_growth", "straggler",
                                        "memory_capacity") else [int(rng.integers(
                                            shape.world_size))]
    for rank, table in run.ranks.items():
        if ranks[0] is None or rank == ranks[0]:
            _inject(kind.name, table, o, rng, run, extra)
    sync_clocks(run)
    table = run.ranks[ranks[0] or 0]
    onset_step = int(table.step[o])
    unit = "steps" if shape.logging == "dense" else "records"
    label = Label(kind.name, onset_step, o, ranks[0], None, unit, extra["timing"],
                  period=extra.get("period", 0),
                  grow_steps=extra.get("grow_records", 0) * shape.every)
    label.target = _target(kind.name, label, shape.every)
    if kind.name == "plateau":          # _flatten changes the loss only, not trend or sd
        rows = label.target if unit == "records" else label.target / shape.every
        label.oracle_z = oracle_z(table, o, int(math.floor(rows)))
    if kind.name == "job_hung":
        hang = run.expect["hang_after_s"] = float(rng.uniform(120, 600))
        for tab in run.ranks.values():
            _truncate(tab, o + 1)
        label.hang_t = max(float(t.t[-1]) for t in run.ranks.values())
        label.unit, label.target = "seconds", hang + 60.0
        run.heartbeats = label.hang_t + np.arange(30.0, 3 * hang, 30.0)
        run.end_t = None
    run.label = label
    return run


def _target(kind: str, label: Label, every: int) -> Optional[float]:
    """The delay the issue asks for, in the label's unit."""
    fixed = {"loss_nonfinite": 0, "grad_nonfinite": 0, "loss_spike": 0, "updates_stalled": 20,
             "lr_zero": 20, "lr_tiny": 1, "lr_huge": 1, "loss_scale_collapse": 20,
             "data_starvation": 50, "throughput_drop": 100}
    if kind in fixed:
        return float(fixed[kind])
    if kind == "plateau":
        return max(300.0, 0.1 * label.onset_step)
    if kind == "periodic_spikes":
        return 3.0 * label.period / every
    if kind == "memory_growth":
        return label.grow_steps / every - 1
    return None


def faulty_suite(seed: int, per_kind: int, kinds: Sequence[str] = tuple(KINDS)) -> List[Run]:
    """``per_kind`` labelled runs of every fault (alternately early and late onsets)."""
    return [faulty(name, seed, i) for name in kinds for i in range(per_kind)]


#: Healthy shapes: (family, logging, steps or records, world size, precision, resumed).
HEALTHY: Sequence[Tuple[str, str, int, int, str, bool]] = (
    ("llm", "dense", 12000, 1, "bf16", False), ("llm", "dense", 3000, 4, "fp16", False),
    ("llm", "dense", 6000, 1, "bf16", True), ("llm", "every10", 40000, 1, "bf16", False),
    ("llm", "every100", 60000, 2, "fp16", False), ("llm", "every5", 15000, 1, "fp16", True),
    ("llm", "epoch", 40, 1, "bf16", False), ("exp", "dense", 8000, 1, "bf16", False),
    ("exp", "dense", 2000, 2, "fp16", True), ("exp", "every5", 10000, 1, "bf16", False),
    ("exp", "epoch", 30, 1, "bf16", False), ("noisy", "dense", 8000, 1, "bf16", False),
    ("noisy", "every10", 20000, 1, "bf16", False), ("noisy", "epoch", 60, 1, "bf16", False),
    ("nearzero", "dense", 8000, 1, "bf16", False), ("nearzero", "dense", 3000, 2, "bf16", True),
    ("nearzero", "every10", 20000, 1, "bf16", False), ("nearzero", "epoch", 25, 1, "bf16",
                                                        False),
)


def healthy_suite(seed: int, scale: float = 1.0,
                  make: Callable[[Shape], Run] = generate) -> List[Run]:
    """Healthy runs of every shape in :data:`HEALTHY` (their lengths times ``scale``)."""
    runs = []
    for i, (family, logging, size, world, precision, resumed) in enumerate(HEALTHY):
        rng = np.random.default_rng([seed, 71, i])
        epoch_len = int(rng.integers(20, 500))
        steps = size * epoch_len if logging == "epoch" else max(400, int(size * scale))
        shape = Shape(seed=int(rng.integers(1, 2 ** 31)), family=family, steps=steps,
                      logging=logging, world_size=world, precision=precision, resumed=resumed,
                      ratio_every=int(rng.choice([0, 1, 10, 50])), epoch_len=epoch_len)
        runs.append(make(with_steps(shape, shape.steps)))
    return runs


def device_bytes(run: Run) -> float:
    """The run's device memory level (for reports)."""
    return float(run.facts["device"]) / GB

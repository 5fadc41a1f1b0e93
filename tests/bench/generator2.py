"""A second labelled-run generator: healthy training runs of many shapes, as step tables.

Written independently of ``synthetic.py`` (other curve families, other logging, other
noise), so a rule tuned on one generator can be checked on the other. A run is built in
three stages, each a pure function of a :class:`Shape` and its seed:

1. :func:`course`: the noise-free course of every training step (learning-rate schedule,
   loss trend and its noise level, gradient norm, step time, memory, fp16 loss scale);
2. :func:`realise`: one rank's noisy values at every training step;
3. :func:`log_table`: what a log keeps of them: every step (``dense``), every k-th step
   (``every5``/``every10``/``every100``, each record the value at its step, times
   averaged over the interval) or one record per epoch (``epoch``: means over the epoch).

Loss families: ``llm`` (a power law in the cumulative learning rate with linear warm-up
and cosine decay, starting near ln(vocabulary), levels up to 12), ``exp`` (exponential
decay to a floor, constant or step-decayed learning rate, levels 0.01 to 5), ``noisy``
(small batches: log-normal noise of 10-25 %; 1 % on a language model's first step),
``nearzero`` (a classifier settling at 0.01-0.05 with gamma noise as large as its level).
Faults are injected on the tables by ``faults2.py``; this module only makes healthy runs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

FAMILIES = ("llm", "exp", "noisy", "nearzero")
LOGGINGS = ("dense", "every5", "every10", "every100", "epoch")
EVERY = {"dense": 1, "every5": 5, "every10": 10, "every100": 100}
T0 = 1_800_000_000.0          # wall clock of the first run_start
GB = float(2 ** 30)


@dataclass(frozen=True)
class Shape:
    """What to generate; every random choice not fixed here comes from ``seed``."""

    seed: int
    family: str = "llm"
    steps: int = 3000               # training steps (for epoch logs: records x epoch length)
    logging: str = "dense"
    world_size: int = 1
    precision: str = "bf16"         # bf16 | fp16
    resumed: bool = False           # crashes once and resumes from an earlier checkpoint
    warmup: Optional[int] = None    # warm-up steps; None: drawn
    ratio_every: int = 10           # update ratio sampled every n steps; 0: not recorded
    epoch_len: int = 100            # steps per epoch (``epoch`` logging)
    cosine_to_zero: Optional[bool] = None   # None: drawn

    @property
    def every(self) -> int:
        return self.epoch_len if self.logging == "epoch" else EVERY[self.logging]


@dataclass
class Table:
    """One rank's log: ``step``/``t`` and signal columns; ``present[name]`` marks the rows
    where a partly recorded signal was recorded (a column without a mask is recorded on
    every row; a NaN there is a recorded NaN)."""

    step: np.ndarray
    t: np.ndarray
    cols: Dict[str, np.ndarray]
    present: Dict[str, np.ndarray] = field(default_factory=dict)
    trend: Optional[np.ndarray] = None      # noise-free loss at each record
    sd: Optional[np.ndarray] = None         # loss noise (standard deviation) at each record

    def __len__(self) -> int:
        return int(self.step.shape[0])

    def recorded(self, name: str) -> np.ndarray:
        """Rows where ``name`` was recorded."""
        if name not in self.cols:
            return np.zeros(len(self), dtype=bool)
        return self.present.get(name, np.ones(len(self), dtype=bool))


@dataclass
class Run:
    """A generated run: one :class:`Table` per rank plus what its run_start declares."""

    shape: Shape
    run_id: str
    config: Dict[str, Any]
    expect: Dict[str, Any]
    ranks: Dict[int, Table]
    restarts: List[Tuple[int, float]] = field(default_factory=list)   # (first row, t)
    heartbeats: np.ndarray = field(default_factory=lambda: np.zeros(0))
    end_t: Optional[float] = None
    label: Any = None                       # a faults2.Label on an anomalous run
    facts: Dict[str, Any] = field(default_factory=dict)   # drawn parameters (lr_max, ...)

    @property
    def records(self) -> int:
        return sum(len(table) for table in self.ranks.values())


# -- stage 1: the course of the run ---------------------------------------------------------

def _schedule(shape: Shape, rng: np.random.Generator, steps: np.ndarray) -> Tuple[np.ndarray,
                                                                                  Dict[str, Any]]:
    """Learning rate at each step and the schedule's parameters."""
    n = shape.steps
    if shape.family in ("llm",) or (shape.family == "noisy" and rng.random() < 0.5):
        lr_max = float(rng.choice([1e-4, 2e-4, 3e-4, 6e-4, 1e-3, 3e-3]))
        warmup = shape.warmup if shape.warmup is not None else int(
            max(5, min(2000, n * rng.uniform(0.005, 0.04))))
        to_zero = shape.cosine_to_zero if shape.cosine_to_zero is not None else rng.random() < 0.6
        total = n if (to_zero or rng.random() < 0.5) else int(n * rng.uniform(1.2, 3.0))
        floor = 0.0 if to_zero else lr_max * rng.uniform(0.05, 0.15)
        frac = np.clip((steps - warmup) / max(1, total - warmup), 0.0, 1.0)
        lr = floor + (lr_max - floor) * 0.5 * (1.0 + np.cos(math.pi * frac))
        lr = np.where(steps <= warmup, lr_max * steps / warmup, lr)
        return lr, {"lr_max": lr_max, "warmup": warmup, "schedule": "cosine", "total": total}
    lr_max = float(rng.choice([1e-5, 5e-5, 1e-4, 1e-3, 1e-2, 0.1]))
    warmup = shape.warmup if shape.warmup is not None else int(rng.choice([0, 0, 10, 50]))
    lr = np.full(steps.shape, lr_max)
    milestones: List[int] = []
    if rng.random() < 0.5:                  # step decay x0.1 at 50 % and 75 %
        milestones = [int(n * 0.5), int(n * 0.75)]
        for m in milestones:
            lr = np.where(steps > m, lr * 0.1, lr)
    if warmup:
        lr = np.where(steps <= warmup, lr_max * steps / warmup, lr)
    return lr, {"lr_max": lr_max, "warmup": warmup, "schedule": "step", "milestones": milestones}


def course(shape: Shape) -> Dict[str, Any]:
    """Noise-free per-step course of a run: arrays over steps 1..N plus drawn facts."""
    rng = np.random.default_rng([shape.seed, 11])
    steps = np.arange(1, shape.steps + 1, dtype=np.int64)
    lr, facts = _schedule(shape, rng, steps)
    lr_max = facts["lr_max"]
    progress = np.cumsum(lr) / lr_max       # steps at full learning rate so far
    family = shape.family
    base = family if family != "noisy" else ("llm" if facts["schedule"] == "cosine" else "exp")
    if base == "llm":
        vocab = int(rng.choice([32000, 50257, 65024, 151936, 250880]))
        start = math.log(vocab) + rng.uniform(-0.2, 0.4)
        floor = rng.uniform(1.2, 3.2)
        alpha, t0 = rng.uniform(0.25, 0.6), rng.uniform(3.0, 40.0)
        gap = (start - floor) * (1.0 + progress / t0) ** (-alpha)
        anneal = 0.15 * gap * (1.0 - lr / lr_max) * (steps > facts["warmup"])
        trend = floor + gap - anneal
        facts.update(vocab=vocab, alpha=alpha, t0=t0, floor=floor)
    elif family == "nearzero":
        classes = int(rng.choice([2, 10, 100, 1000]))
        level = rng.uniform(0.01, 0.05)
        tau = shape.steps * rng.uniform(0.02, 0.1)
        trend = level + (math.log(classes) - level) * np.exp(-progress / tau)
        facts.update(classes=classes, level=level, shape_k=rng.uniform(1.0, 2.0))
    else:
        start = rng.uniform(0.5, 5.0)
        floor = max(0.01, start * rng.uniform(0.002, 0.3))
        tau = shape.steps * rng.uniform(0.05, 0.35)
        trend = floor + (start - floor) * np.exp(-progress / tau)
        for m in facts.get("milestones", ()):      # a learning-rate drop lowers the loss
            trend = np.where(steps > m, floor + (trend - floor) * 0.85, trend)
        facts.update(floor=floor)
    if family == "noisy":
        sigma = rng.uniform(0.10, 0.25)
    elif family == "nearzero":
        sigma = 0.03
    else:
        sigma = rng.uniform(0.005, 0.03) if base == "llm" else rng.uniform(0.02, 0.08)
    grad0, grad_floor = rng.uniform(2.0, 30.0), rng.uniform(0.15, 1.5)
    grad = grad_floor + (grad0 - grad_floor) * np.exp(-steps / rng.uniform(20, 300))
    seconds = float(10 ** rng.uniform(-1.3, 0.7))       # 0.05 .. 5 s per step
    step_time = np.full(steps.shape, seconds)
    step_time[0] *= rng.uniform(10, 60)                 # graph compilation
    step_time[1:3] *= 1.5
    every_ckpt = int(rng.choice([200, 500, 1000, 2000]))
    step_time[every_ckpt - 1::every_ckpt] *= rng.uniform(3, 15)
    facts.update(family_base=base, sigma=sigma, seconds=seconds, checkpoint_every=every_ckpt,
                 ratio_gain=float(rng.uniform(0.5, 5.0)),
                 device=rng.uniform(2, 60) * GB, host=rng.uniform(2, 40) * GB,
                 wait_share=rng.uniform(0.005, 0.05),
                 tokens=int(rng.choice([4096, 16384, 65536, 262144])) // shape.world_size)
    out: Dict[str, Any] = {"steps": steps, "lr": lr, "trend": trend, "grad": grad,
                           "step_time": step_time, "facts": facts}
    if shape.precision == "fp16":
        out["loss_scale"], out["overflow"] = _loss_scale(shape, rng, facts)
    return out


def _loss_scale(shape: Shape, rng: np.random.Generator,
                facts: Dict[str, Any]) -> Tuple[np.ndarray, np.ndarray]:
    """A dynamic loss scaler: a few overflows at the start, then x2 after every clean window
    and /2 on an overflow, which gets likelier as the scale grows past what the gradients
    allow (so the scale hovers around that level)."""
    unit = float(rng.choice([1.0, 1.0, 2.0 ** -17]))    # some logs print the scale / 2**17
    scale, window = 2.0 ** 16, int(rng.choice([100, 1000, 2000]))
    early = int(rng.integers(0, 6))
    level = 2.0 ** rng.uniform(14, 20)
    draws = rng.random(shape.steps)
    scales, flags = np.empty(shape.steps), np.zeros(shape.steps)
    clean = 0
    for i in range(shape.steps):
        if i < early or draws[i] < min(0.5, 0.7 * scale / level / window):
            flags[i], clean = 1.0, 0
            scale = max(1.0, scale / 2)
        else:
            clean += 1
            if clean >= window:
                scale, clean = scale * 2, 0
        scales[i] = scale * unit
    facts.update(scale_unit=unit, scale_window=window, early_overflows=early)
    return scales, flags


# -- stage 2: one rank's noisy values ---------------------------------------------------------

def realise(shape: Shape, path: Dict[str, Any], rank: int, stream: int = 0) -> Dict[str, Any]:
    """Noisy per-step signals of ``rank`` (``stream`` > 0: another draw, a resumed process)."""
    rng = np.random.default_rng([shape.seed, 23, rank, stream])
    f = path["facts"]
    n = shape.steps
    trend = path["trend"]
    if shape.family == "noisy":
        sd = trend * f["sigma"]
        z = rng.normal(0.0, 1.0, n)
        loss = trend * np.exp(f["sigma"] * z - f["sigma"] ** 2 / 2)
        if f["family_base"] == "llm":
            # before its first update a language model predicts near-uniformly, so every
            # batch scores ln(vocabulary) within about a per cent, however small the batch:
            # the first step's noise is 1 %, the batch-to-batch spread comes with learning
            sd[0] = trend[0] * 0.01
            loss[0] = trend[0] * math.exp(0.01 * z[0])
    elif shape.family == "nearzero":
        k, level = f["shape_k"], f["level"]
        above = trend - level
        sd = np.abs(above) * f["sigma"] + level / math.sqrt(k)
        loss = above * (1 + rng.normal(0, f["sigma"], n)) + level * rng.gamma(k, 1.0 / k, n)
    else:
        sd = trend * f["sigma"]
        loss = trend + sd * rng.normal(0.0, 1.0, n)
    grad = path["grad"] * np.exp(rng.normal(0, 0.1, n))
    bumps = rng.random(n) < 1 / 2000               # a healthy odd batch now and then
    grad = np.where(bumps, grad * rng.uniform(1.5, 2.5, n), grad)
    rank_speed = 1.0 + 0.03 * rng.standard_normal() if shape.world_size > 1 else 1.0
    step_time = path["step_time"] * rank_speed * np.exp(rng.normal(0, rng.uniform(0.02, 0.08), n))
    slow = rng.random(n) < 1 / 3000                # the host is busy for 20-50 steps
    for i in np.flatnonzero(slow):
        step_time[i:i + int(rng.integers(20, 50))] *= 1.3
    share = f["wait_share"] * np.exp(rng.normal(0, 0.3, n))
    bursts = np.flatnonzero(rng.random(n) < 1 / 3000)     # a slow shard: 3-10 steps
    for i in bursts:
        share[i:i + int(rng.integers(3, 10))] = rng.uniform(0.3, 0.6)
    wait = share * step_time
    wait[0] += rng.uniform(2, 10)                  # the loader's workers start
    step_time[0] += wait[0] - share[0] * step_time[0]
    host = f["host"] * (1 + rng.uniform(0.03, 0.08) * (1 - np.exp(-path["steps"] / 10.0)))
    host = host * (1 + rng.normal(0, 0.001, n))
    device = np.full(n, f["device"]) * (1 + rng.normal(0, 0.0002, n))
    device[0] *= 0.7
    ratio = path["lr"] * f["ratio_gain"] * np.exp(rng.normal(0, 0.1, n))
    out = {"loss": loss, "sd": sd, "grad_norm": grad, "lr": path["lr"].copy(),
           "step_time_s": step_time, "data_wait_s": wait, "update_ratio": ratio,
           "mem_device_bytes": device, "mem_device_peak_bytes": device * 1.1,
           "mem_host_rss_bytes": host, "tokens": np.full(n, float(f["tokens"]))}
    if "loss_scale" in path:
        out["loss_scale"], out["overflow"] = path["loss_scale"].copy(), path["overflow"].copy()
    return out


# -- stage 3: what the log keeps ---------------------------------------------------------------

MEANS = ("loss", "sd", "grad_norm", "step_time_s", "data_wait_s", "tokens")


def log_table(shape: Shape, path: Dict[str, Any], values: Dict[str, Any]) -> Table:
    """The records a log of ``shape.logging`` keeps of one rank's per-step ``values``."""
    steps, every = path["steps"], shape.every
    seconds = np.cumsum(values["step_time_s"])
    if shape.logging == "dense":
        rows = np.arange(len(steps))
        cols = {k: np.array(v, dtype=np.float64) for k, v in values.items() if k != "sd"}
        sd = values["sd"]
    else:
        rows = np.arange(every - 1, len(steps), every)
        cols, sd = {}, None
        means = MEANS if shape.logging == "epoch" else ("step_time_s", "data_wait_s")
        for name, v in values.items():
            v = np.asarray(v, dtype=np.float64)
            if name == "overflow":
                cols[name] = np.maximum.reduceat(v, rows - every + 1)
            elif name in means:
                mean = np.add.reduceat(v, rows - every + 1) / every
                if name == "sd":        # the mean of an epoch has less noise
                    sd = mean / math.sqrt(every)
                else:
                    cols[name] = mean
            elif name == "sd":
                sd = v[rows]
            else:
                cols[name] = v[rows]
    trend = np.asarray(path["trend"], dtype=np.float64)
    if shape.logging == "epoch":                # the epoch's mean follows the mean trend
        trend = np.add.reduceat(trend, rows - every + 1) / every
    else:
        trend = trend[rows].copy()
    table = Table(steps[rows].copy(), T0 + 5.0 + seconds[rows], cols, trend=trend,
                  sd=np.asarray(sd).copy())
    _sample_ratio(shape, table)
    if shape.precision != "fp16":
        table.cols.pop("overflow", None)
        table.cols.pop("loss_scale", None)
    return table


def _sample_ratio(shape: Shape, table: Table) -> None:
    """The update ratio is sampled (every ``ratio_every`` steps on dense logs)."""
    if not shape.ratio_every:
        table.cols.pop("update_ratio", None)
    elif shape.logging == "dense" and shape.ratio_every > 1:
        table.present["update_ratio"] = table.step % shape.ratio_every == 0


# -- a whole run ---------------------------------------------------------------------------

def config_of(shape: Shape, facts: Dict[str, Any]) -> Dict[str, Any]:
    """What the run's run_start declares (as a MindFormers job would)."""
    rng = np.random.default_rng([shape.seed, 31])
    config: Dict[str, Any] = {
        "grad_accum": 1, "global_batch": 8 * shape.world_size, "seq_length": 2048,
        "mem_device_capacity_bytes": facts["device"] * float(rng.uniform(1.15, 1.6)),
        "mem_host_total_bytes": facts["host"] * float(rng.uniform(2.0, 8.0)),
    }
    if "vocab" in facts:
        config["vocab_size"] = facts["vocab"]
    if rng.random() < 0.5:
        config["learning_rate"] = facts["lr_max"]
        config["warmup_steps"] = facts["warmup"]
    if shape.precision == "fp16":
        config["loss_scale_window"] = facts["scale_window"]
    return config


def generate(shape: Shape, run_id: Optional[str] = None) -> Run:
    """The healthy run of ``shape`` (a resumed one crashes and repeats some steps)."""
    path = course(shape)
    facts = path["facts"]
    run_id = run_id or f"{shape.family}-{shape.logging}-w{shape.world_size}-{shape.seed}"
    shared = realise(shape, path, 0)
    ranks: Dict[int, Table] = {}
    restarts: List[Tuple[int, float]] = []
    for rank in range(shape.world_size):
        values = shared if rank == 0 else _rank_values(shape, path, rank, shared)
        table = log_table(shape, path, values)
        if shape.resumed:
            again = log_table(shape, path, _rank_values(shape, path, rank, shared, stream=1))
            table, restarts = _resume(shape, facts, table, again)
        ranks[rank] = table
    run = Run(shape, run_id, config_of(shape, facts), {}, ranks, restarts, facts=facts)
    sync_clocks(run)
    return run


def sync_clocks(run: Run) -> None:
    """Synchronous ranks finish a step together: the slowest rank sets every rank's clock
    (a few milliseconds apart); the run ends a second after its last step."""
    common = np.max(np.stack([table.t - 0.002 * rank for rank, table in run.ranks.items()]),
                    axis=0)
    for rank, table in run.ranks.items():
        table.t = common + 0.002 * rank
    run.restarts = [(row, float(common[row - 1] + common[row]) / 2) for row, _ in run.restarts]
    run.end_t = float(common[-1]) + 1.0


def _rank_values(shape: Shape, path: Dict[str, Any], rank: int, shared: Dict[str, Any],
                 stream: int = 0) -> Dict[str, Any]:
    """Another rank's draw; the loss and gradient norm are all-reduced (the same on every
    rank) in half of the runs, per-rank (local batches) in the other half."""
    values = realise(shape, path, rank, stream)
    if shape.seed % 2 == 0 and stream == 0:
        for name in ("loss", "grad_norm"):
            values[name] = shared[name]
    return values


def _resume(shape: Shape, facts: Dict[str, Any], first: Table, again: Table
            ) -> Tuple[Table, List[Tuple[int, float]]]:
    """The process dies some steps after a checkpoint and resumes from it: the steps in
    between are logged twice (the second time with other noise and a slow first step)."""
    rng = np.random.default_rng([shape.seed, 47])
    every = facts["checkpoint_every"]
    last = int(first.step[-1])
    ckpts = [c for c in range(every, last, every) if c >= last * 0.2 and c <= last * 0.7]
    ckpt = ckpts[len(ckpts) // 2] if ckpts else (last // 2 // shape.every) * shape.every
    crash = ckpt + max(shape.every, int(rng.uniform(0.2, 0.9) * min(every, last - ckpt)))
    head = first.step <= crash
    tail = again.step > ckpt
    gap = float(rng.uniform(60, 600))
    origin = float(again.t[np.flatnonzero(again.step <= ckpt)[-1]]) if (~tail).any() else T0
    restart_t = float(first.t[head][-1]) + gap
    t_tail = again.t[tail] - origin + restart_t + 30.0       # start-up, then the first step
    rows = int(head.sum())

    def join(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate([a[head], b[tail]])

    cols = {k: join(first.cols[k], again.cols[k]) for k in first.cols}
    extra = 19.0 * cols["step_time_s"][rows]                   # compiles again
    cols["step_time_s"][rows] += extra
    t_tail += extra
    present = {k: join(first.present[k], again.present[k]) for k in first.present}
    table = Table(join(first.step, again.step), np.concatenate([first.t[head], t_tail]),
                  cols, present, join(first.trend, again.trend), join(first.sd, again.sd))
    return table, [(rows, restart_t)]


def with_steps(shape: Shape, steps: int) -> Shape:
    """``shape`` with another length (kept a whole number of log intervals)."""
    return replace(shape, steps=max(shape.every, steps // shape.every * shape.every))

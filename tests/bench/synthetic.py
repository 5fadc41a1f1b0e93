"""A labelled generator of synthetic LLM training runs, for measuring detection quality.

A healthy run looks like LLM pretraining seen through the msdoctor hooks:

- loss: a power law with warm-up-era fall from ~ln(vocab), Gaussian noise at three levels
  (0.5 %, 1.5 %, 3.5 % of the loss), a slow AR(1) wander and rare harder batches;
- learning rate: linear warm-up over 1-2 % of the steps, then cosine to 10 %;
- gradient norm: decaying to a floor, log-normal jitter; ``inf`` on fp16 overflow steps;
- fp16 dynamic loss scale (start 2^16, x2 per clean window, /2 on overflow) or a fixed one;
- tokens per step fixed (static shapes), ``micro_steps`` when accumulating;
- step time: jitter, a slow first (compile) step, checkpoint and evaluation pauses, rare
  slow steps, data-wait blips, short slow-shard stretches and short per-rank slowdowns;
- ``update_ratio`` sampled every 50 steps; host RSS with a warm-up ramp and, in half the
  runs, a one-off step up; device memory on "device" runs;
- logging every step or every k-th step, one or several ranks sharing the wall clock, and
  in some runs a crash and resume from the last checkpoint (the step goes back).

An anomalous run is a healthy run with one anomaly injected at a known step
(``anomalies.py``; :data:`ANOMALIES` lists the alert that must catch each). Everything is
drawn from ``numpy.random.default_rng(seed)``: the same spec gives the same run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

GIB = float(1 << 30)
T0_WALL = 1.7e9                      # wall-clock origin of synthetic runs (2023-11)
NOISE_LEVELS = (0.005, 0.015, 0.035)  # relative per-step loss noise: large batch .. small batch
SIGNALS = ("loss", "grad_norm", "loss_scale", "overflow", "lr", "tokens", "step_time_s",
           "data_wait_s", "update_ratio", "mem_device_bytes", "mem_device_peak_bytes",
           "mem_host_rss_bytes", "micro_steps")
SPARSE = ("update_ratio",)          # recorded on sampled steps only: NaN = not recorded


@dataclass
class Spec:
    """What to generate. ``anomaly`` is None for a healthy run."""

    seed: int
    steps: int = 10_000
    log_every: int = 1
    noise: float = 0.015
    precision: str = "bf16"          # fp32 | bf16 | fp16
    world_size: int = 1
    grad_accum: int = 1
    device: bool = False             # device memory recorded (NPU-like) or host RSS only
    expect: bool = False             # run_start.expect.tokens_per_s_per_device given
    fixed_scale: bool = False        # fp16 with a static loss scale (healthy)
    anomaly: Optional[str] = None
    t0: int = 0                      # injection step (first recorded step at or after it)
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        kind = self.anomaly or "healthy"
        return (f"{kind}-s{self.seed}-{self.precision}-k{self.log_every}"
                f"-n{self.noise:g}-w{self.world_size}")


@dataclass
class Label:
    """The ground truth of an anomalous run: which alert, from which step, on which rank."""

    alert: str
    step: int                        # first recorded step that shows the anomaly
    rank: Optional[int] = None       # None: any rank counts
    period: int = 0                  # LossSpikesPeriodic: the injected period
    hang_t: float = math.nan         # JobHung: wall time of the last step


@dataclass
class Run:
    """A generated run: per-rank columns (NaN = not recorded) plus run metadata."""

    spec: Spec
    run_id: str
    config: Dict[str, Any]
    expect: Dict[str, Any]
    ranks: Dict[int, Dict[str, np.ndarray]]   # rank -> {"step", "t", signal...}
    heartbeats: Dict[int, np.ndarray]         # rank -> wall times of heartbeat events
    end_t: Optional[float]                    # run_end time; None while "still running" (hung)
    label: Optional[Label] = None
    restarts: List[Tuple[int, float]] = field(default_factory=list)  # (first row, run_start t)

    @property
    def n_step_events(self) -> int:
        return sum(len(cols["step"]) for cols in self.ranks.values())


def ar1(shocks: np.ndarray, phi: float, start: float = 0.0, block: int = 512) -> np.ndarray:
    """``x[i] = phi * x[i-1] + shocks[i]`` without a Python loop per element.

    Within a block, ``x[i] = phi^(i+1) * (x_start + cumsum(shocks[j] / phi^(j+1)))``;
    blocks keep ``phi^-j`` far from overflow.
    """
    out = np.empty_like(shocks)
    powers = phi ** np.arange(1, block + 1, dtype=np.float64)
    level = start
    for lo in range(0, shocks.size, block):
        chunk = shocks[lo:lo + block]
        p = powers[:chunk.size]
        out[lo:lo + chunk.size] = p * (level + np.cumsum(chunk / p))
        level = out[lo + chunk.size - 1]
    return out


# -- healthy run ------------------------------------------------------------------------------

class _Model:
    """The per-run random parameters and the full-resolution (every step) healthy series."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.rng = rng = np.random.default_rng(spec.seed)
        n = spec.steps
        a, c, s0 = rng.uniform(1.6, 2.3), rng.uniform(0.28, 0.42), rng.uniform(20, 60)
        b = (rng.uniform(10.0, 11.5) - a) * s0 ** c
        self.total = int(n * rng.uniform(1.0, 1.3))
        warm = max(10, int(self.total * rng.uniform(0.01, 0.02)))
        peak = float(rng.choice([1e-4, 3e-4, 6e-4]))
        # tokens and step time
        self.seq = int(rng.choice([2048, 4096]))
        self.micro_batch = int(rng.choice([1, 2]))
        self.tokens = float(self.seq * self.micro_batch * spec.grad_accum)
        self.tps = rng.uniform(2500, 4500)           # tokens/s/device when healthy
        self.base_time = self.tokens / self.tps
        self.jitter = float(rng.choice([0.02, 0.04]))
        self.ckpt_every = int(rng.choice([500, 1000, 2000]))
        self.rss = rng.uniform(8, 40) * GIB
        self.host_total = float(rng.choice([512, 768, 1024])) * GIB
        self.capacity = float(rng.choice([32, 64])) * GIB
        self.dev_used = rng.uniform(0.4, 0.65) * self.capacity
        self.dev_peak = self.dev_used + rng.uniform(0.05, 0.2) * self.capacity
        # a one-off step up of host memory in half the runs (first evaluation, buffers)
        self.rss_jump = int(rng.integers(1000, n)) if n > 2000 and rng.random() < 0.5 else n
        self.rss_jump_frac = rng.uniform(0.03, 0.10)
        self.grad_floor = rng.uniform(0.2, 1.0)
        self.grad_sigma = float(rng.choice([0.05, 0.1, 0.15]))
        # rows: one per executed step; a resumed run re-runs the steps after its last checkpoint
        self.resume_row = self.resume_from = None
        steps = np.arange(1, n + 1)
        if spec.extra.get("resume_at"):
            crash = int(spec.extra["resume_at"])
            self.resume_from = crash - crash % self.ckpt_every          # last checkpoint
            self.resume_row = crash
            steps = np.concatenate((np.arange(1, crash + 1), np.arange(self.resume_from + 1, n + 1)))
        self.n = steps.size
        self.s = s = steps.astype(np.float64)                  # the step number of each row
        self.since_start = np.arange(self.n, dtype=np.float64) + 1   # rows since the process began
        if self.resume_row is not None:
            self.since_start[self.resume_row:] -= self.resume_row
        # loss: a + b (s + s0)^-c, starting near ln(vocab); lr: warm-up 1-2 %, cosine to 10 %
        self.curve = a + b * (s + s0) ** -c
        progress = np.clip((s - warm) / max(1, self.total - warm), 0, 1)
        self.lr = np.where(s <= warm, peak * s / warm,
                           peak * (0.1 + 0.45 * (1 + np.cos(math.pi * progress))))
        self.scale, self.overflow = self._loss_scale()
        self.step_time_shared = self._shared_step_time()
        self.pause = self._checkpoint_pause()

    def wander(self, sigma: float, phi: float = 0.995) -> np.ndarray:
        """A slow AR(1) wander with stationary standard deviation ``sigma``."""
        shocks = self.rng.normal(0.0, sigma * math.sqrt(1 - phi * phi), self.n)
        return ar1(shocks, phi, self.rng.normal(0.0, sigma))

    def _loss_scale(self):
        """fp16 dynamic loss scaling: start 2^16, x2 after a clean window, /2 on overflow."""
        spec, rng, n = self.spec, self.rng, self.n
        scale = np.ones(n)
        overflow = np.zeros(n)
        if spec.precision != "fp16":
            return scale, overflow
        if spec.fixed_scale:
            scale[:] = float(2 ** int(rng.integers(10, 15)))
            return scale, overflow
        ceiling = 2.0 ** int(rng.integers(10, 15))     # above this, fp16 gradients overflow
        window = int(rng.choice([1000, 2000]))
        draws = rng.random(n)
        value, clean = 2.0 ** 16, 0
        for i in range(n):       # a scalar state machine; a few 1e5 steps at most
            scale[i] = value
            if (value > ceiling and draws[i] < 0.5) or draws[i] < 1e-4:
                overflow[i] = 1.0
                value, clean = max(value / 2, 1.0), 0
            else:
                clean += 1
                if clean >= window:
                    value, clean = value * 2, 0
        return scale, overflow

    def _shared_step_time(self) -> np.ndarray:
        """Compute time common to all ranks (synchronous steps): compile, rare slow steps."""
        rng, n = self.rng, self.n
        t = np.full(n, self.base_time)
        t[self.since_start == 1] += rng.uniform(30, 180)              # graph compile
        slow = rng.random(n) < 2e-3                                    # GC, host hiccups
        t[slow] *= rng.uniform(1.5, 3.0, int(slow.sum()))
        return t

    def _checkpoint_pause(self) -> np.ndarray:
        """Seconds saving a checkpoint (5-60 s) or evaluating (30-300 s, every 5000 steps)
        before a step; it lands in that step's data wait on every rank (the next collective
        synchronises them)."""
        pause = np.zeros(self.n)
        idx = np.flatnonzero(self.s % self.ckpt_every == 1)[1:]   # the step after a save
        pause[idx] = self.rng.uniform(5, 60, idx.size)
        idx = np.flatnonzero(self.s % 5000 == 1)[1:]
        pause[idx] += self.rng.uniform(30, 300, idx.size)
        return pause


def _rank_series(m: _Model, rank: int) -> Dict[str, np.ndarray]:
    """Full-resolution healthy series of one rank (index i is step i + 1)."""
    spec, rng, n, s = m.spec, m.rng, m.n, m.s
    noise = spec.noise
    loss = m.curve * (1 + rng.normal(0, noise, n) + m.wander(noise / 3))
    bumps = rng.random(n) < 1e-3                                       # harder batches
    loss[bumps] *= 1 + rng.uniform(2, 4, int(bumps.sum())) * noise
    grad = (m.grad_floor + rng.uniform(4, 9) * np.exp(-s / rng.uniform(100, 400)))
    grad = grad * np.exp(rng.normal(0, m.grad_sigma, n) + m.wander(m.grad_sigma / 2))
    grad[m.overflow > 0] = np.inf
    wait = m.base_time * rng.uniform(0.005, 0.03) * np.exp(rng.normal(0, 0.3, n))
    blips = rng.random(n) < 2e-3
    wait[blips] += m.base_time * rng.uniform(0.5, 2.0, int(blips.sum()))
    for start in np.flatnonzero(rng.random(n) < 2e-4):      # a slow shard: 20-40 starved steps
        wait[start:start + int(rng.integers(20, 40))] += m.base_time * rng.uniform(0.3, 1.0)
    wait += m.pause
    compute = m.step_time_shared * np.exp(rng.normal(0, m.jitter, n))
    for start in np.flatnonzero(rng.random(n) < 2e-4):      # this rank slow for 10-30 steps
        compute[start:start + int(rng.integers(10, 30))] *= rng.uniform(1.3, 2.0)
    rss = (m.rss * (1 - 0.4 * np.exp(-m.since_start / rng.uniform(50, 150)))
           * (1 + rng.normal(0, 0.001, n)))
    rss[m.rss_jump:] *= 1 + m.rss_jump_frac
    ratio = np.full(n, np.nan)
    sampled = (s % 50) == 0
    ratio[sampled] = (m.lr[sampled] * rng.uniform(2, 10)
                      * np.exp(rng.normal(0, 0.2, int(sampled.sum()))))
    cols = {
        "loss": loss, "grad_norm": grad, "lr": m.lr.copy(), "tokens": np.full(n, m.tokens),
        "step_time_s": compute + wait, "data_wait_s": wait, "update_ratio": ratio,
        "mem_host_rss_bytes": rss,
    }
    if spec.precision == "fp16":
        cols["loss_scale"] = m.scale.copy()
        cols["overflow"] = m.overflow.copy()
    elif spec.extra.get("log_unit_scale"):
        cols["loss_scale"] = np.ones(n)                # MindFormers cell without scaling logs 1.0
        cols["overflow"] = np.zeros(n)
    if spec.grad_accum > 1:
        cols["micro_steps"] = np.full(n, float(spec.grad_accum))
    if spec.device:
        cols["mem_device_bytes"] = m.dev_used * (1 + rng.normal(0, 0.002, n))
        cols["mem_device_peak_bytes"] = np.full(n, m.dev_peak)
    return cols


def _config(m: _Model) -> Dict[str, Any]:
    spec = m.spec
    config = {
        "model": "llama-synthetic", "params": 7e9, "seq_length": m.seq, "micro_batch": m.micro_batch,
        "global_batch": m.micro_batch * spec.grad_accum * spec.world_size,
        "grad_accum": spec.grad_accum, "precision": spec.precision, "optimizer": "AdamW",
        "lr": float(m.lr.max()), "total_steps": m.total, "parallel": {"dp": spec.world_size},
        "mem_host_total_bytes": m.host_total,
    }
    if spec.device:
        config["mem_device_capacity_bytes"] = m.capacity
    return config


# -- public API -------------------------------------------------------------------------------

def generate(spec: Spec) -> Run:
    """Generate one run (healthy, or with ``spec.anomaly`` injected at ``spec.t0``)."""
    from anomalies import inject  # sibling module; keeps this one about healthy runs

    m = _Model(spec)
    full = {rank: _rank_series(m, rank) for rank in range(spec.world_size)}
    label, hang_at = None, None
    if spec.anomaly:
        label, hang_at = inject(m, full, spec)
    run = _assemble(m, full, hang_at)
    run.label = label
    if label is not None and label.alert == "JobHung":
        label.hang_t = float(run.ranks[0]["t"][-1])
    return run


def _assemble(m: _Model, full: Dict[int, Dict[str, np.ndarray]], hang_at: Optional[int]) -> Run:
    spec = m.spec
    n = hang_at if hang_at is not None else m.n
    keep = (m.s[:n] % spec.log_every) == 0
    ranks, heartbeats, last_t = {}, {}, 0.0
    # Ranks of a synchronous job share the wall clock: a step ends when the slowest rank's
    # does. ``step_time_s`` stays the rank's own time (how a straggler shows, see the runbook).
    slowest = np.max([cols["step_time_s"][:n] for cols in full.values()], axis=0)
    if m.resume_row is not None:                         # crash, restart, reload the checkpoint
        slowest[m.resume_row] += m.rng.uniform(120, 600)
    shared = T0_WALL + np.cumsum(slowest)
    restarts = []
    if m.resume_row is not None:
        restarts.append((int(keep[:m.resume_row].sum()), float(shared[m.resume_row - 1]) + 1.0))
    for rank, cols in full.items():
        t = shared + m.rng.uniform(0.0, 0.05, n)          # callback / clock jitter per rank
        out = {"step": m.s[:n].astype(np.int64)[keep], "t": t[keep]}
        for name, values in cols.items():
            out[name] = values[:n][keep]
        ranks[rank] = out
        last_t = max(last_t, float(t[-1]))
    beat_end = last_t + (3600.0 if hang_at is not None else 0.0)
    for rank in full:
        heartbeats[rank] = np.arange(T0_WALL + 30.0, beat_end, 30.0)
    end_t = None if hang_at is not None else last_t + 1.0
    expect = {}
    if spec.expect:
        expect["tokens_per_s_per_device"] = float(m.tps * m.rng.uniform(0.9, 1.1))
    return Run(spec, spec.name, _config(m), expect, ranks, heartbeats, end_t, restarts=restarts)


def step_events(run: Run, rank: int) -> Iterator[Dict[str, Any]]:
    """The run's step events of one rank as schema-v1 dicts (for spool files).

    NaN means "not recorded" only for the sparse signals (:data:`SPARSE`); elsewhere a
    NaN is a recorded NaN (an injected non-finite loss, say).
    """
    cols = run.ranks[rank]
    names = [k for k in SIGNALS if k in cols]
    for i in range(len(cols["step"])):
        event = {"v": 1, "type": "step", "rank": rank, "run": run.run_id,
                 "t": float(cols["t"][i]), "step": int(cols["step"][i])}
        for name in names:
            value = float(cols[name][i])
            if name == "overflow":
                event[name] = bool(value)
            elif not (name in SPARSE and math.isnan(value)):
                event[name] = value
        yield event


def run_start(run: Run, rank: int, t: float = T0_WALL) -> Dict[str, Any]:
    """The run_start event a (re)started training process of ``rank`` writes."""
    return {"v": 1, "type": "run_start", "rank": rank, "run": run.run_id, "t": t,
            "world_size": run.spec.world_size, "config": run.config, "expect": run.expect}


def events(run: Run, rank: int) -> List[Dict[str, Any]]:
    """All events of one rank in time order: run_start, steps, heartbeats, run_end."""
    start = run_start(run, rank)
    timeline = [(float(e["t"]), 1, e) for e in step_events(run, rank)]
    timeline += [(t, 0, run_start(run, rank, t)) for _, t in run.restarts]
    timeline += [(float(t), 0, {"v": 1, "type": "heartbeat", "rank": rank, "run": run.run_id,
                                "t": float(t)}) for t in run.heartbeats[rank]]
    timeline.sort(key=lambda item: (item[0], item[1]))
    out = [start] + [item[2] for item in timeline]
    if run.end_t is not None:
        out.append({"v": 1, "type": "run_end", "rank": rank, "run": run.run_id,
                    "t": run.end_t, "status": "completed"})
    return out


# -- the labelled suite -----------------------------------------------------------------------

#: Steps after the injection a run keeps going (the detection horizon), per anomaly.
HORIZON = {
    "LossNonFinite": 200, "GradNormNonFinite": 200, "LossPlateau": 6000, "LossSpike": 300,
    "LossSpikesPeriodic": 4000, "LossOscillating": 1000, "UpdatesStalled": 600,
    "GradNormSpike": 300, "LossScaleStuck": 5000, "LossScaleCollapse": 300,
    "DataLoaderStarved": 500, "ThroughputBelowBaseline": 800, "MemoryGrowth": 2000,
    "MemoryNearCapacity": 300, "JobHung": 1, "StragglerRank": 800, "StepCountMismatch": 300,
    "GradNormSpikesRecurring": 1000,     # last: the seeds of the others keep their indices
}
ANOMALIES = tuple(HORIZON)
FP16_ONLY = ("LossScaleStuck", "LossScaleCollapse")


def clean_specs(seed: int) -> List[Spec]:
    """Healthy runs covering every precision, logging interval, noise level and rank count;
    two of them crash and resume from their last checkpoint (steps go back).

    150k step numbers (about 180k step events over all ranks).
    """
    rng = np.random.default_rng(seed)
    layout = [  # (steps, log_every, precision, world_size, grad_accum, device, expect, extra)
        (40_000, 1, "bf16", 1, 1, True, True, {}),
        (25_000, 1, "fp16", 2, 8, False, False, {"resume_at": 14_321}),
        (20_000, 10, "fp16", 1, 1, True, True, {}),
        (15_000, 1, "fp32", 1, 4, False, True, {}),
        (12_000, 5, "bf16", 4, 1, True, False, {"log_unit_scale": True, "resume_at": 7_777}),
        (12_000, 1, "fp16", 1, 1, False, False, {"fixed_scale": True}),
        (10_000, 10, "bf16", 8, 8, True, True, {}),
        (8_000, 1, "fp16", 4, 1, True, True, {}),
        (8_000, 1, "bf16", 1, 1, False, False, {}),
    ]
    specs = []
    for i, (steps, k, precision, world, accum, device, expect, extra) in enumerate(layout):
        extra = dict(extra)
        fixed = bool(extra.pop("fixed_scale", False))
        specs.append(Spec(seed=int(rng.integers(1 << 31)), steps=steps, log_every=k,
                          noise=NOISE_LEVELS[i % len(NOISE_LEVELS)], precision=precision,
                          world_size=world, grad_accum=accum, device=device, expect=expect,
                          fixed_scale=fixed, extra=extra))
    return specs


def anomaly_specs(seed: int, per_type: int, types=ANOMALIES) -> List[Spec]:
    """``per_type`` anomalous runs per anomaly, varied in noise, logging, precision and ranks."""
    specs = []
    for anomaly in types:
        rng = np.random.default_rng([seed, ANOMALIES.index(anomaly)])   # independent of `types`
        for j in range(per_type):
            k = (1, 1, 5, 10)[j % 4]
            precision = "fp16" if anomaly in FP16_ONLY else ("bf16", "fp16", "fp32")[j % 3]
            world = 1
            if anomaly == "StragglerRank":
                world = (2, 4, 8)[j % 3]
            elif j % 5 == 4:
                world = 2
            accum = (1, 8, 4)[j % 3] if anomaly != "StepCountMismatch" else (4, 8)[j % 2]
            t0 = 1 if anomaly == "StepCountMismatch" else int(rng.integers(1200, 2500))
            t0 = int(math.ceil(t0 / k) * k)
            extra: Dict[str, Any] = {}
            if anomaly == "UpdatesStalled":
                extra["variant"] = ("ratio", "repeat")[j % 2]
            horizon = HORIZON[anomaly]
            specs.append(Spec(seed=int(rng.integers(1 << 31)), steps=t0 + horizon, log_every=k,
                              noise=NOISE_LEVELS[(j // 4) % len(NOISE_LEVELS)],
                              precision=precision, world_size=world, grad_accum=accum,
                              device=bool(j % 2), expect=bool((j // 2) % 2),
                              anomaly=anomaly, t0=t0, extra=extra))
    return specs

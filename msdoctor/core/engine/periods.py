"""``spike_period``: the period of a loss's spikes, from the onsets of ``robust_z`` > 6.

An onset is the first of consecutive spiking points (a spike that decays over several records
of a log of every k-th step counts once), merged as episodes (:func:`episode_starts`); the
period is regular among the onsets in the window, or a chain of exactly periodic ones among
other onsets (:func:`chained_period`), judged with the log's record interval at the onsets.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import numpy as np

from msdoctor.core.engine.gathers import point_rows
from msdoctor.core.engine.nodes import Frame, Node, Out
from msdoctor.core.engine.windows import _EMPTY_F, _EMPTY_I, episode_starts

SPIKE_Z = 6.0


#: Spike onsets a period needs: three after a quiet stretch (no onset in the QUIET * n steps
#: before the window), four in a run whose loss spikes anyway (heavy-tailed noise), where two
#: intervals agree by chance about one time in 30.
ONSETS_AFTER_QUIET = 3
ONSETS_IN_NOISE = 4
QUIET = 4


def regular_period(events: np.ndarray, interval: float = 1.0) -> float:
    """The period of ``events`` (>= 3 step numbers) if their spacing is regular, else 0.

    Intervals are compared with their median d: each must be within max(2, 5%) of
    d or of 2d (one missed spike), and at least two must be ~d. ``interval``: the steps
    between the log's records at the onsets (for :func:`chained_period`).
    """
    if events.shape[0] < ONSETS_AFTER_QUIET:
        return 0.0
    d = np.diff(events).astype(np.float64)
    period = float(np.median(d))
    if period <= 0:
        return 0.0
    k = np.rint(d / period)
    tol = max(2.0, 0.05 * period)
    ok = ((k == 1) | (k == 2)) & (np.abs(d - k * period) <= tol * np.maximum(k, 1))
    if ok.all() and np.count_nonzero(k == 1) >= 2:
        return period
    return chained_period(events, interval)


#: A period among other onsets: the latest onset and CHAIN - 1 before it, each one period
#: (within CHAIN_TOL steps) before the next, the other onsets in their span and in the window
#: too sparse to have made the chain by chance (each in a slot less than CHAIN_CHANCE of the time).
CHAIN = 4
CHAIN_TOL = 2.0
CHAIN_CHANCE = 0.1


def chained_period(events: np.ndarray, interval: float = 1.0) -> float:
    """The period of a chain of ``CHAIN`` onsets ending at the latest of ``events``, each
    exactly (within ``CHAIN_TOL`` steps) one period after the one before, other onsets between
    them allowed (noise spiking among periodic spikes) if too few, in the chain's span and in
    the whole window, to have made it by chance (each lands in a slot, 2 CHAIN_TOL + 1 steps or
    one record of a log of every ``interval``-th step, less than CHAIN_CHANCE of the time); 0 if
    none. The shortest such period (tried from the nearest onset back), as the median of the
    chain's intervals."""
    count = events.shape[0]
    if count <= CHAIN:              # all of them in the chain: regular_period has answered
        return 0.0
    e = events.astype(np.float64)
    slot = max(2 * CHAIN_TOL + 1, interval)
    wide = max(slot, float(np.min(np.diff(e))))      # between a chain's ends: see the docstring
    if (count - CHAIN) * slot > CHAIN_CHANCE * (e[-1] - e[0]):     # a window busy with onsets
        return 0.0
    for j in range(count - 2, CHAIN - 3, -1):
        d = e[-1] - e[j]
        chain, i = [e[-1], e[j]], j
        while d > 2 * CHAIN_TOL and len(chain) < CHAIN:
            i = int(np.searchsorted(e, chain[-1] - d - CHAIN_TOL, side="left"))
            if i >= count or e[i] > chain[-1] - d + CHAIN_TOL:
                break
            chain.append(e[i])
        others = count - i - CHAIN
        if len(chain) == CHAIN and others * wide <= CHAIN_CHANCE * (chain[0] - chain[-1]):
            return float(np.median(-np.diff(chain)))
    return 0.0


def onset_rows(zvals: np.ndarray, rows: np.ndarray, steps: np.ndarray, state: Dict[str, Any]
               ) -> Tuple[np.ndarray, np.ndarray]:
    """The ``rows`` (x's points) that spike (z > 6) when the point before did not (a spike over
    consecutive points, on a log of every k-th step too, is one onset), and their step distance
    to the point before (1 at the first point). ``state`` carries the last point over batches."""
    if not rows.shape[0]:
        return rows, _EMPTY_F
    spiky = zvals[rows] > SPIKE_Z
    before = np.empty(rows.shape[0], dtype=bool)
    before[0] = bool(state.get("spiking", 0.0))
    before[1:] = spiky[:-1]
    q = steps[rows].astype(np.float64)
    prev = np.concatenate(([state.get("last_point", math.nan)], q[:-1]))
    state["spiking"], state["last_point"] = float(spiky[-1]), float(q[-1])
    onset = spiky & ~before
    gap = q[onset] - prev[onset]
    return rows[onset], np.where(gap > 0, gap, 1.0)        # no point before, a restart: 1


class SpikePeriod(Node):
    """``spike_period(x, n[, m])``; its child is ``robust_z(x, max(16, n // 10)[, m])``
    (spikes: z > 6, the first of consecutive spiking points an onset; with ``m``, judged from
    m points of history on)."""

    name = "spike_period"
    stateful = True

    def make_key(self) -> str:
        least = "".join(f",{p}" for p in self.children[0].params[1:])
        return f"spike_period({self.children[0].children[0].key},{self.params[0]}{least})"

    def new_state(self) -> Dict[str, Any]:
        return {"events": _EMPTY_I, "gaps": _EMPTY_F, "last_spike": math.nan, "spiking": 0.0,
                "last_point": math.nan}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        n = int(self.params[0])
        zvals, mask = args[0]
        rows = point_rows(args[0], frame.n)
        if rows is None:
            rows = np.arange(frame.n)
        onsets, gaps = onset_rows(zvals, rows, frame.steps, state)
        carry = state.get("gaps", _EMPTY_F)     # the kept starts' record intervals
        if carry.shape[0] != state["events"].shape[0]:
            carry = np.ones(state["events"].shape[0])
        E, before, hi, new = episode_starts(frame, onsets, (QUIET + 1) * n, state, "events",
                                            "last_spike")
        G = np.concatenate((carry, gaps[new]))
        state["gaps"] = G[G.shape[0] - state["events"].shape[0]:]
        lo = np.searchsorted(E, frame.steps - n, side="right")
        quiet = lo == before                     # no onset in the stretch before the window
        out = np.zeros(frame.n)
        many = (hi - lo) >= np.where(quiet, ONSETS_AFTER_QUIET, ONSETS_IN_NOISE)
        if many.any():
            pairs = lo[many] * (E.shape[0] + 1) + hi[many]
            uniq, inverse = np.unique(pairs, return_inverse=True)
            cut = [(p // (E.shape[0] + 1), p % (E.shape[0] + 1)) for p in uniq.tolist()]
            periods = np.array([regular_period(E[a:b], float(G[a:b].max())) for a, b in cut])
            out[many] = periods[inverse]
        return out, mask

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """0 for the ranks with no spike in the batch, fewer than three onsets kept and no spike
        at their last point (what :meth:`evaluate` answers them, its state trimmed later); the
        others rank by rank."""
        from msdoctor.core.engine.segments import some_ranks
        segs = frame.segments
        assert segs is not None
        zvals, mask = args[0]
        spiky = zvals > SPIKE_Z
        if isinstance(mask, np.ndarray):
            spiky &= mask
        elif mask is False:
            spiky[:] = False
        busy = np.zeros(segs.count, dtype=bool)
        busy[segs.seg[spiky]] = True
        busy |= np.fromiter((st["events"].shape[0] >= ONSETS_AFTER_QUIET
                             or st.get("spiking", 0.0) > 0 for st in states),
                            dtype=bool, count=segs.count)
        out = some_ranks(self, frame, args, states, np.flatnonzero(busy).tolist(),
                         np.zeros(frame.n))
        return out, mask

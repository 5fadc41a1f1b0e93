"""The rule engine's state in a snapshot: what :meth:`Engine.state_dict` saves and
:meth:`Engine.load_state_dict` restores (operator carry-overs, alert states, per-rank facts).

The operators' dict states of a run's ranks are saved as columns (:mod:`.stacked`); an engine
with the same operators as the one that saved takes them back by index, one whose rules
changed by operator key (an operator of a changed rule starts fresh).
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Dict, List, Tuple

import numpy as np

from msdoctor.core.engine.context import RankContext, RunContext, pack, unpack
from msdoctor.core.engine.lifecycle import FIRING, AlertState
from msdoctor.core.engine.stacked import OpColumn, stack_ops, unstack_ops
from msdoctor.core.heap import collector_paused
from msdoctor.core.layers import LayerBook

#: The layout of the engine's state (a different one is ignored: the engine starts fresh).
STATE_VERSION = 1
#: Per-rank facts saved as they are.
FACTS = ("last_step", "last_t", "last_step_t", "first_event_t", "last_event_t", "running",
         "gone", "heard_t", "rows")


@collector_paused()
def state_of(engine: Any) -> Dict[str, Any]:
    """The state of ``engine`` (an :class:`~msdoctor.core.engine.evaluator.Engine`): JSON
    values and numpy arrays (``msdoctor.core.snapshot`` stores the arrays natively)."""
    runs = {}
    stateful = [i for i, node in enumerate(engine.program.nodes) if node.stateful]
    for name, rc in engine.runs.items():
        ranks = {}
        contexts = list(rc.ranks.values())
        held = [ctx.states for ctx in contexts]
        ops = []                     # each operator's states on every rank, saved as columns
        other: List[List[Any]] = [[] for _ in contexts]     # states that are not dicts
        for i in stateful:
            column = list(map(itemgetter(i), held))
            if set(map(type, column)) != {dict}:
                for r, s in enumerate(column):
                    if s and type(s) is not dict:
                        other[r].append([i, pack(s)])
            ops.append((i, column))
        for ctx, states in zip(contexts, other):
            ranks[str(ctx.rank)] = {
                "states": states,
                "last": np.array(ctx.last, dtype=np.float64),
                "alerts": {k: st.to_dict() for k, st in ctx.alerts.items()},
                "firing": dict(ctx.firing), "firing_since": dict(ctx.firing_since),
                "checkpoints": pack(ctx.checkpoints),
                **{fact: getattr(ctx, fact) for fact in FACTS},
            }
        runs[name] = {"config": pack(rc.config), "expect": pack(rc.expect),
                      "world_size": rc.world_size, "start_rank": rc.start_rank,
                      "latest": {k: {str(r): pack(v) for r, v in d.items()}
                                 for k, d in rc.latest.items()},
                      "ranks": ranks, "stacked": stack_ops(ops, len(contexts))}
    return {"v": STATE_VERSION, "keys": engine.program.keys, "runs": runs,
            "transitions": engine.transitions,
            "reported": [list(k) for k in engine._reported], "layers": engine.layers.state_dict()}


@collector_paused()
def restore(engine: Any, state: Dict[str, Any]) -> None:
    """Resume ``engine`` from :func:`state_of` (nothing when the layout differs)."""
    if not state or state.get("v") != STATE_VERSION:
        return
    saved_keys = state.get("keys")
    engine.runs = {}
    for name, saved in state.get("runs", {}).items():
        rc = RunContext(name, unpack(saved.get("config") or {}),
                        unpack(saved.get("expect") or {}), saved.get("world_size"),
                        start_rank=saved.get("start_rank"))
        rc.latest = {k: {int(r): unpack(v) for r, v in d.items()}
                     for k, d in saved.get("latest", {}).items()}
        engine.runs[name] = rc
        saved_ranks = saved.get("ranks", {})
        ops = unstack_ops(saved.get("stacked") or [], len(saved_ranks))
        contexts = _contexts(engine, rc, saved_ranks, saved_keys, ops)
        for ctx, rs in zip(contexts, saved_ranks.values()):
            ctx.alerts = {k: AlertState.from_dict(d) for k, d in rs.get("alerts", {}).items()}
            firing = rs.get("firing")
            ctx.firing = (dict(firing) if isinstance(firing, dict) else
                          {k: None for k, st in ctx.alerts.items() if st.state == FIRING})
            since = rs.get("firing_since")
            ctx.firing_since = dict(since) if isinstance(since, dict) else {}
            checkpoints = rs.get("checkpoints")
            ctx.checkpoints = unpack(checkpoints) if isinstance(checkpoints, list) else []
            for fact in FACTS:
                if fact in rs:
                    setattr(ctx, fact, rs[fact])
    engine.transitions = int(state.get("transitions", 0))
    engine._reported = {tuple(k) for k in state.get("reported", [])}
    engine.layers = LayerBook()
    engine.layers.load_state_dict(state.get("layers") or {})


def _contexts(engine: Any, rc: RunContext, saved_ranks: Dict[str, Any], saved_keys: Any,
              ops: Dict[int, OpColumn]) -> List[RankContext]:
    """The run's rank contexts with their operator states and last values. Ranks saved by
    the operators the engine has now take their states operator by operator; the others
    (changed rules, an odd entry) rank by rank through :func:`_operators`."""
    program = engine.program
    keys, nodes = program.keys, program.nodes
    fresh = program.new_states()        # which operators start from more than an empty dict
    refill = [i for i, s in enumerate(fresh) if not (type(s) is dict and not s)]
    if saved_keys == keys and any(not 0 <= i < len(nodes) for i in ops):
        raise ValueError(f"operator states saved for operators {sorted(ops)[-1]!r} and below "
                         f"do not fit the {len(nodes)} operators")
    contexts, direct = [], []
    for pos, (rank_s, rs) in enumerate(saved_ranks.items()):
        own, last = rs.get("states", {}), rs.get("last", {})
        if not (saved_keys == keys and isinstance(own, list) and isinstance(last, np.ndarray)
                and last.shape == (len(keys),)):
            ctx = engine.rank_context(rc.run, int(rank_s))
            _operators(ctx, keys, saved_keys, rs, [[i, states[pos]] for i, states in
                                                   sorted(ops.items())
                                                   if states[pos] is not None])
            contexts.append(ctx)
            continue
        states: List[Dict[str, Any]] = [{} for _ in nodes]
        for i in refill:
            column = ops.get(i)
            if column is None or column[pos] is None:
                states[i] = nodes[i].new_state()
        for i, packed in own:
            states[i] = unpack(packed)
        ctx = rc.ranks[int(rank_s)] = RankContext(rc, int(rank_s), states, last.tolist())
        contexts.append(ctx)
        direct.append((pos, states))
    for i, column in ops.items():          # the columns' states, one operator at a time
        for pos, states in direct:
            state = column[pos]
            if state is not None:
                states[i] = state
    return contexts


def _operators(ctx: RankContext, keys: List[str], saved_keys: Any, saved: Dict[str, Any],
               columns: List[List[Any]]) -> None:
    """A rank's operator states and last values: by index when the operators are those that
    saved them (``columns``: already unpacked), else by key."""
    own, last = saved.get("states", {}), saved.get("last", {})
    if saved_keys == keys and isinstance(own, list) and isinstance(last, np.ndarray) \
            and last.shape == (len(keys),):
        for i, packed in own:
            ctx.states[i] = unpack(packed)
        for i, ready in columns:
            ctx.states[i] = ready
        ctx.last = last.tolist()
        return
    if columns:
        own = (own if isinstance(own, list) else []) + columns
    states, by_key = _by_key(own, last, saved_keys)
    for i, key in enumerate(keys):
        if key in states:
            ctx.states[i] = unpack(states[key])
        if key in by_key:
            ctx.last[i] = unpack(by_key[key])


def _by_key(states: Any, last: Any, keys: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A rank's saved operator states and last values by operator key: saved as lists by
    index into the snapshot's ``keys`` (or, in earlier snapshots, as dicts by key)."""
    if isinstance(keys, list):
        states = {keys[i]: s for i, s in states if isinstance(i, int) and 0 <= i < len(keys)}
        if isinstance(last, np.ndarray) and last.shape[0] == len(keys):
            last = dict(zip(keys, last.tolist()))
    return (states if isinstance(states, dict) else {}), (last if isinstance(last, dict) else {})

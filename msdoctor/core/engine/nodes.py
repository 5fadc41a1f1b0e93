"""Expression nodes: the stateless ones (constants, signals, arithmetic, logic, run facts).

Every node evaluates a whole batch at once: it gets a :class:`Frame` (the batch's
step numbers, times and the rank's context) and its children's outputs, and
returns an :data:`Out` ``(values, mask)``: ``values`` is a float64 array with one
value per row of the batch; ``mask`` says at which rows the node has a *point*
(one of its signals was recorded there): ``None`` = every row, ``False`` = none,
else a bool array. Window functions consume points; see :mod:`.windows`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from msdoctor.core.batch import StepBatch
from msdoctor.core.engine.context import RankContext

Mask = Union[None, bool, np.ndarray]
Out = Tuple[np.ndarray, Mask]


@dataclass
class Frame:
    """One evaluation: ``n`` rows of one rank (a step batch, or a single clock tick)."""

    steps: np.ndarray                  # int64 step numbers
    fsteps: np.ndarray                 # the same as float64
    t: np.ndarray                      # float64 wall time, non-decreasing
    batch: Optional[StepBatch]         # None on a tick
    rank: RankContext
    now: Optional[float] = None        # the clock on a tick, None in a batch
    memo: Dict[Any, Any] = field(default_factory=dict)   # work operators share within a batch
    #: many ranks' rows in one frame (a :class:`~.segments.Segments`), None for one rank
    segments: Any = None

    @property
    def n(self) -> int:
        return int(self.steps.shape[0])


def combine(masks: Sequence[Mask]) -> Mask:
    """The union of several point masks."""
    result: Mask = False
    for mask in masks:
        if mask is None:
            return None
        if mask is False:
            continue
        result = (result | mask) if isinstance(result, np.ndarray) else mask
    return result


def truthy(values: np.ndarray) -> np.ndarray:
    """Non-zero and not NaN."""
    return (values != 0) & ~np.isnan(values)


class Node:
    """One operator of a compiled expression."""

    name = ""                 # function or operator name, part of the key
    clock = False             # reads the wall clock (evaluated on ticks too)
    stateful = False          # keeps a carry-over state between batches
    rowwise = False           # a function of its arguments' rows alone (no rank, no state)
    run_scoped = False        # its state is the run's, kept when a resume restarts the windows

    def __init__(self, children: Sequence["Node"] = (), params: Sequence[Any] = ()) -> None:
        self.children: Tuple[Node, ...] = tuple(children)
        self.params: Tuple[Any, ...] = tuple(params)
        self.clock = type(self).clock or any(c.clock for c in self.children)
        self.key = self.make_key()

    def make_key(self) -> str:
        parts = [c.key for c in self.children] + [_param(p) for p in self.params]
        return f"{self.name}({','.join(parts)})"

    def new_state(self) -> Dict[str, Any]:
        """A fresh carry-over state (a dict of floats, ints and numpy arrays)."""
        return {}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        raise NotImplementedError

    def value_node(self) -> "Node":
        """The node whose value an alert on this condition reports (``$value``)."""
        return self

    def __repr__(self) -> str:
        return self.key


def _param(p: Any) -> str:
    if isinstance(p, float) and p.is_integer() and abs(p) < 1e15:
        return str(int(p))
    return str(p)


class Const(Node):
    rowwise = True
    name = "const"

    def make_key(self) -> str:
        return _param(self.params[0]) if math.isfinite(self.params[0]) else str(self.params[0])

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        return np.full(frame.n, float(self.params[0])), False


class Signal(Node):
    """A per-rank signal, last observation carried forward, NaN if never recorded."""

    name = "signal"
    stateful = True

    def make_key(self) -> str:
        return str(self.params[0])

    def new_state(self) -> Dict[str, Any]:
        return {"last": math.nan}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        name = self.params[0]
        if name == "step":
            return frame.fsteps, None
        batch = frame.batch
        column = None if batch is None else batch.columns.get(name)
        if batch is None or column is None:
            return np.full(frame.n, state["last"]), False
        mask = batch.masks.get(name)
        if mask is None:
            state["last"] = float(column[-1])
            return column, None
        return locf(column, mask, state), mask

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """Many ranks at once (``frame.batch`` holds their joined columns, see
        :func:`~.segments.join_batches`)."""
        name = self.params[0]
        if name == "step":
            return frame.fsteps, None
        assert frame.batch is not None
        column = frame.batch.columns.get(name)
        if column is None:
            prior = np.array([st["last"] for st in states], dtype=np.float64)
            return prior[frame.segments.seg], False
        mask = frame.batch.masks.get(name)
        if mask is None:
            for st, v in zip(states, column[frame.segments.last_rows()].tolist()):
                st["last"] = v
            return column, None
        return locf_segments(column, mask, frame, states), mask


def locf(values: np.ndarray, mask: np.ndarray, state: Dict[str, Any], key: str = "last") -> np.ndarray:
    """``values`` at the rows of ``mask``, carried forward; ``state[key]`` before the first."""
    n = values.shape[0]
    idx = np.where(mask, np.arange(n), -1)
    np.maximum.accumulate(idx, out=idx)
    out = values[idx]
    out[idx < 0] = state[key]
    if n and idx[-1] >= 0:
        state[key] = float(out[-1])
    return out


def locf_segments(values: np.ndarray, mask: np.ndarray, frame: Frame,
                  states: List[Dict[str, Any]], key: str = "last") -> np.ndarray:
    """:func:`msdoctor.core.engine.nodes.locf` within each rank (``states[r][key]`` before
    its first point), updating each rank's ``key``."""
    segs = frame.segments
    assert segs is not None
    n = values.shape[0]
    idx = np.where(mask, np.arange(n), -1)
    np.maximum.accumulate(idx, out=idx)
    before = idx < segs.bounds[segs.seg]             # no point of its own rank yet
    out = values[np.maximum(idx, 0)]
    if before.any():
        prior = np.array([st[key] for st in states], dtype=np.float64)
        out[before] = prior[segs.seg[before]]
    lasts = segs.last_rows()
    has = ~before[lasts]
    for r in np.flatnonzero(has).tolist():
        states[r][key] = float(out[lasts[r]])
    return out


_Ufunc = Callable[[np.ndarray, np.ndarray], np.ndarray]
_ARITH: Dict[str, _Ufunc] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "%": np.fmod,
}


class BinOp(Node):
    rowwise = True
    name = "binop"

    def make_key(self) -> str:
        return f"({self.children[0].key}{self.params[0]}{self.children[1].key})"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        (a, ma), (b, mb) = args
        return _ARITH[self.params[0]](a, b), combine((ma, mb))


class Pow(Node):
    rowwise = True
    name = "pow"

    def make_key(self) -> str:
        return f"({self.children[0].key}**{_param(self.params[0])})"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        (a, ma), = args
        return np.power(a, float(self.params[0])), ma


class Neg(Node):
    rowwise = True
    name = "neg"

    def make_key(self) -> str:
        return f"(-{self.children[0].key})"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        (a, ma), = args
        return -a, ma


_CMP: Dict[str, _Ufunc] = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
}


class Compare(Node):
    """A comparison chain ``a < b <= c``; NaN on either side is false."""

    rowwise = True
    name = "cmp"

    def make_key(self) -> str:
        parts = [self.children[0].key]
        for op, child in zip(self.params, self.children[1:]):
            parts.append(op + child.key)
        return "(" + "".join(parts) + ")"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        result: Optional[np.ndarray] = None
        for op, (a, _), (b, _) in zip(self.params, args, args[1:]):
            if op == "!=":
                r = (a != b) & ~np.isnan(a) & ~np.isnan(b)
            else:
                r = _CMP[op](a, b)
            result = r if result is None else (result & r)
        assert result is not None                   # a chain has at least one comparison
        return result.astype(np.float64), combine([m for _, m in args])

    def value_node(self) -> Node:
        return self.children[0].value_node()


class And(Node):
    rowwise = True
    name = "and"

    def make_key(self) -> str:
        return "(" + " and ".join(c.key for c in self.children) + ")"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        result = truthy(args[0][0])
        for values, _ in args[1:]:
            result &= truthy(values)
        return result.astype(np.float64), combine([m for _, m in args])

    def value_node(self) -> Node:
        return self.children[0].value_node()


class Or(Node):
    rowwise = True
    name = "or"

    def make_key(self) -> str:
        return "(" + " or ".join(c.key for c in self.children) + ")"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        result = truthy(args[0][0])
        for values, _ in args[1:]:
            result |= truthy(values)
        return result.astype(np.float64), combine([m for _, m in args])

    def value_node(self) -> Node:
        return FirstTrue([c for c in self.children] + [c.value_node() for c in self.children])


class FirstTrue(Node):
    """The value (second half of the children) of the first true condition (first half)."""

    rowwise = True
    name = "first_true"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        k = len(args) // 2
        out = args[2 * k - 1][0].copy()
        for i in range(k - 2, -1, -1):
            cond = truthy(args[i][0])
            out[cond] = args[k + i][0][cond]
        return out, combine([m for _, m in args])


class Not(Node):
    rowwise = True
    name = "not"

    def make_key(self) -> str:
        return f"(not {self.children[0].key})"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        (a, ma), = args
        return (~truthy(a)).astype(np.float64), ma

    def value_node(self) -> Node:
        return self.children[0].value_node()


class Elementwise(Node):
    """A function of one argument applied row by row (``abs``, ``ln``, ``exp``, ``round``);
    floating-point warnings are off for every operator (``Program`` evaluates under
    ``np.errstate(all="ignore")``)."""

    rowwise = True

    @staticmethod
    def apply(a: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        (a, ma), = args
        return self.apply(a), ma


class Abs(Elementwise):
    name = "abs"

    @staticmethod
    def apply(a: np.ndarray) -> np.ndarray:
        return np.abs(a)


class Ln(Elementwise):
    """``ln(x)``: the natural logarithm, NaN where x <= 0."""

    name = "ln"

    @staticmethod
    def apply(a: np.ndarray) -> np.ndarray:
        return np.where(a > 0, np.log(np.where(a > 0, a, 1.0)), np.nan)


class Exp(Elementwise):
    """``exp(x)``: e to the x (inf where it overflows), e.g. the number of classes k of a loss ln(k)."""

    name = "exp"

    @staticmethod
    def apply(a: np.ndarray) -> np.ndarray:
        return np.exp(a)


class Round(Elementwise):
    """``round(x)``: the nearest integer (halves to even, as numpy), NaN stays NaN."""

    name = "round"

    @staticmethod
    def apply(a: np.ndarray) -> np.ndarray:
        return np.round(a)


class Coalesce(Node):
    """``coalesce(a, b, ...)``: at each row the first argument that is not NaN (NaN if none is)."""

    rowwise = True
    name = "coalesce"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        out = args[-1][0].copy()
        for values, _ in reversed(args[:-1]):
            known = ~np.isnan(values)
            out[known] = values[known]
        return out, combine([m for _, m in args])


class Last(Node):
    rowwise = True
    name = "last"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        return args[0]

    def value_node(self) -> Node:
        return self.children[0].value_node()


class RunFact(Node):
    """``expected(NAME)``, ``config(NAME)``, ``world_size()``, ``rank_count()``: per-run facts."""

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        return np.full(frame.n, self.value(frame.rank.run)), False

    def value(self, run: Any) -> float:
        """The fact of ``run`` (NaN when it does not state it)."""
        if self.name == "expected":
            return _number(run.expect.get(self.params[0]))
        if self.name == "config":
            return _number(run.config.get(self.params[0]))
        if self.name == "world_size":
            return _number(run.world_size)
        return float(len(run.ranks))              # rank_count

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        segs = frame.segments
        runs = [f.rank.run for f in segs.frames]
        if all(run is runs[0] for run in runs):
            return np.full(frame.n, self.value(runs[0])), False
        values = np.array([self.value(run) for run in runs])
        return values[segs.seg], False


def _number(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return math.nan


class Clock(Node):
    """``seconds_since_step()``, ``seconds_since_event()``, ``running()``."""

    clock = True

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        rank = frame.rank
        if self.name == "running":
            return np.full(frame.n, 1.0 if rank.running else 0.0), None
        if frame.now is None:          # evaluated at step events: no time has passed
            return np.zeros(frame.n), None
        if self.name == "seconds_since_step":
            since = rank.last_step_t if rank.last_step_t is not None else rank.first_event_t
        else:
            since = rank.last_event_t
        value = math.nan if since is None else frame.now - since
        return np.full(frame.n, value), None

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        segs = frame.segments
        if frame.now is None and self.name != "running":
            return np.zeros(frame.n), None
        values = np.array([self.evaluate(f, args, {})[0][0] if f.n else math.nan
                           for f in segs.frames])
        return values[segs.seg], None

"""The function table of the expression language: names, arguments and their checks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple, Type, Union

import msdoctor.core.engine.curve as curve
import msdoctor.core.engine.nodes as nodes
import msdoctor.core.engine.orderstats as orderstats
import msdoctor.core.engine.periods as periods
import msdoctor.core.engine.rankmedian as rankmedian
import msdoctor.core.engine.sequences as sequences
import msdoctor.core.engine.trend as trend
import msdoctor.core.engine.windows as windows
from msdoctor.core.engine.nodes import Node

#: A function parameter: a number (a window, an alpha) or a signal name.
Param = Union[float, str]

#: Per-rank signals an expression may name.
SIGNALS: Tuple[str, ...] = (
    "loss", "grad_norm", "loss_scale", "lr", "tokens", "step_time_s", "data_wait_s",
    "update_ratio", "mem_device_bytes", "mem_device_peak_bytes", "mem_host_rss_bytes",
    "micro_steps", "tokens_per_s", "overflow", "data_wait_share", "step", "layers_still",
)

#: Named constants.
CONSTANTS: Dict[str, float] = {"nan": float("nan"), "inf": float("inf"), "true": 1.0, "false": 0.0}

# Argument kinds: an expression, an identifier, a window length, a fraction.
EXPR, IDENT, STEPS, STEPS0, ALPHA = "expr", "ident", "steps", "steps0", "alpha"

EXPECTED_ARG = {
    EXPR: "an expression",
    IDENT: "a bare name such as tokens_per_s_per_device",
    STEPS: "a whole number of steps >= 1 (a number literal)",
    STEPS0: "a whole number of steps >= 0 (a number literal)",
    ALPHA: "a number literal with 0 < alpha <= 1",
}


@dataclass(frozen=True)
class Function:
    name: str
    args: Tuple[str, ...]
    build: Callable[[List[Node], List[Param]], Node]
    window: bool = False        # consumes the argument's history (no clock inside)
    usage: str = ""
    variadic: bool = False      # the last argument kind may repeat (``args`` is the minimum)
    optional: Tuple[str, ...] = ()  # argument kinds that may follow ``args``


def _cls(cls: Type[Node], name: str) -> Callable[[List[Node], List[Param]], Node]:
    def build(children: List[Node], params: List[Param]) -> Node:
        node = cls.__new__(cls)
        node.name = name
        cls.__init__(node, children, params)
        return node
    return build


def _spike_period(children: List[Node], params: List[float]) -> Node:
    n = int(params[0])
    z_params: List[Param] = [float(max(16, n // 10))]
    z_params.extend(params[1:2])
    z = _cls(orderstats.RobustZ, "robust_z")(children, z_params)
    return _cls(periods.SpikePeriod, "spike_period")([z], [n])


def _jump(children: List[Node], params: List[float]) -> Node:
    """``jump(x, k)``: x over the highest of its k points before (records, not steps)."""
    before = _cls(windows.Prev, "prev")(children, [1.0])
    highest = _cls(windows.MinMax, "max")([before], [1.0, float(params[0])])
    return nodes.BinOp([children[0], highest], ["/"])


def _table() -> Dict[str, Function]:
    x_n = (EXPR, STEPS)
    specs: Sequence[Tuple[str, Tuple[str, ...], Callable, bool, str]] = [
        ("nonfinite", (EXPR,), _cls(sequences.NonFinite, "nonfinite"), True, "nonfinite(x)"),
        ("mean", x_n, _cls(windows.Aggregate, "mean"), True, "mean(x, n[, m])"),
        ("sum", x_n, _cls(windows.Aggregate, "sum"), True, "sum(x, n[, m])"),
        ("count", x_n, _cls(windows.Aggregate, "count"), True, "count(x, n[, m])"),
        ("std", x_n, _cls(windows.Aggregate, "std"), True, "std(x, n[, m])"),
        ("min", x_n, _cls(windows.MinMax, "min"), True, "min(x, n[, m])"),
        ("max", x_n, _cls(windows.MinMax, "max"), True, "max(x, n[, m])"),
        ("median", x_n, _cls(orderstats.Median, "median"), True, "median(x, n[, m])"),
        ("quantile", (EXPR, STEPS, ALPHA), _cls(orderstats.Quantile, "quantile"), True,
         "quantile(x, n, q[, m])"),
        ("ewma", (EXPR, ALPHA), _cls(sequences.Ewma, "ewma"), True, "ewma(x, alpha)"),
        ("delta", x_n, _cls(windows.Delta, "delta"), True, "delta(x, n)"),
        ("prev", x_n, _cls(windows.Prev, "prev"), True, "prev(x, k)"),
        ("rel_change", x_n, _cls(windows.RelChange, "rel_change"), True, "rel_change(x, n)"),
        ("slope", x_n, _cls(windows.Slope, "slope"), True, "slope(x, n[, m])"),
        ("robust_z", x_n, _cls(orderstats.RobustZ, "robust_z"), True, "robust_z(x, n[, m])"),
        ("spike_period", x_n, _spike_period, True, "spike_period(x, n[, m])"),
        ("steps_since_change", (EXPR,), _cls(sequences.StepsSinceChange, "steps_since_change"),
         True, "steps_since_change(x)"),
        ("repeat_count", (EXPR,), _cls(sequences.RepeatCount, "repeat_count"), True,
         "repeat_count(x)"),
        ("baseline", (EXPR, STEPS0, STEPS), _cls(orderstats.Baseline, "baseline"), True,
         "baseline(x, warmup, n[, m])"),
        ("powerlaw_miss", (EXPR, ALPHA), _cls(trend.PowerLawMiss, "powerlaw_miss"), True,
         "powerlaw_miss(x, f)"),
        ("powerlaw_stall", (EXPR, ALPHA), _cls(trend.PowerLawStall, "powerlaw_stall"), True,
         "powerlaw_stall(x, f)"),
        ("curve_stall", (EXPR, ALPHA), _cls(curve.CurveStall, "curve_stall"), True,
         "curve_stall(x, f[, from_step])"),
        ("first_max", x_n, _cls(sequences.FirstMax, "first_max"), True, "first_max(x, n)"),
        ("jump", x_n, _jump, True, "jump(x, k)"),
        ("episodes", x_n, _cls(sequences.Episodes, "episodes"), True, "episodes(x, n)"),
        ("abs", (EXPR,), _cls(nodes.Abs, "abs"), False, "abs(x)"),
        ("ln", (EXPR,), _cls(nodes.Ln, "ln"), False, "ln(x)"),
        ("exp", (EXPR,), _cls(nodes.Exp, "exp"), False, "exp(x)"),
        ("round", (EXPR,), _cls(nodes.Round, "round"), False, "round(x)"),
        ("coalesce", (EXPR, EXPR), _cls(nodes.Coalesce, "coalesce"), False, "coalesce(a, b, ...)"),
        ("last", (EXPR,), _cls(nodes.Last, "last"), False, "last(x)"),
        ("expected", (IDENT,), _cls(nodes.RunFact, "expected"), False, "expected(NAME)"),
        ("config", (IDENT,), _cls(nodes.RunFact, "config"), False, "config(NAME)"),
        ("rank_median", (EXPR,), _cls(rankmedian.RankMedian, "rank_median"), True, "rank_median(x)"),
        ("rank_count", (), _cls(nodes.RunFact, "rank_count"), False, "rank_count()"),
        ("world_size", (), _cls(nodes.RunFact, "world_size"), False, "world_size()"),
        ("seconds_since_step", (), _cls(nodes.Clock, "seconds_since_step"), False,
         "seconds_since_step()"),
        ("seconds_since_event", (), _cls(nodes.Clock, "seconds_since_event"), False,
         "seconds_since_event()"),
        ("running", (), _cls(nodes.Clock, "running"), False, "running()"),
    ]
    return {name: Function(name, args, build, window, usage, variadic=name in _VARIADIC,
                           optional=_OPTIONAL.get(name, ()))
            for name, args, build, window, usage in specs}


#: Functions taking any number (at least ``len(args)``) of arguments.
_VARIADIC = ("coalesce",)

#: Optional trailing arguments: ``m``, the fewest points a window holds (see docs/rules.md).
_OPTIONAL: Dict[str, Tuple[str, ...]] = {
    name: (STEPS0,) for name in ("median", "robust_z", "quantile", "spike_period", "mean", "sum",
                                 "count", "std", "min", "max", "slope", "baseline")}
_OPTIONAL["curve_stall"] = (STEPS0,)     # the first step it answers at (curve.py)


FUNCTIONS: Dict[str, Function] = _table()

#: Upper bounds of numeric parameters (keep windows and memory bounded).
MAX_STEPS = 1_000_000

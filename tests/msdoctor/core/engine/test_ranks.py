"""Many ranks evaluated together (a live poll) give what evaluating each rank alone gives."""
from __future__ import annotations

import math
import re
from typing import Dict, List

import numpy as np
import pytest

from msdoctor.core.batch import StepBatch
from msdoctor.core.engine import evaluator
from msdoctor.core.engine.context import RankContext, RunContext
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.loader import default_rules_dir, load_rules
from msdoctor.core.engine.nodes import Frame
from msdoctor.core.engine.program import Program
from msdoctor.core.engine.segments import join_batches, segments_of
from tests.msdoctor.core.engine.helpers import rank_polls, run_expr
from tests.msdoctor.core.engine.test_windows import make_series

EXPRESSIONS = ["first_max(x, 3)", "mean(x, 20)", "sum(x, 20)", "count(x, 20)", "std(x, 20)", "min(x, 20)",
               "max(x, 33)", "median(x, 15)", "median(x, 100)", "median(x, 15, 8)",
               "median(x, 100, 12)", "quantile(x, 15, 0.9)", "quantile(x, 100, 0.25, 12)",
               "delta(x, 10)", "delta(mean(x, 20), 40)", "delta(mean(x, 12, 6), 30) + mean(x, 5) - max(x, 60)",
               "prev(x, 2)", "jump(x, 5)", "slope(x, 30)", "mean(x, 20, 8)", "std(x, 12, 6)",
               "max(x, 10, 5)", "slope(x, 30, 10)", "rel_change(x, 25)", "robust_z(x, 20)",
               "robust_z(x, 100, 10)", "robust_z(x, 200) > 2 and median(x, 200) > 0",
               "repeat_count(x > 3)", "nonfinite(x)", "first_max(x, 50)", "ewma(x, 0.1)",
               "steps_since_change(x > 3)", "spike_period(x, 200)", "spike_period(x, 200, 10)", "episodes(x > 4, 50)",
               "baseline(x, 10, 40)", "baseline(x, 3, 15, 6)", "rank_median(x)", "x + step", "ln(x)",
               "round(exp(x / 100))", "x + running()",
               "x + seconds_since_step()", "mean(x, 20) + count(x, 20) - max(x, 20)",
               "sum(x, 12, 6) * min(x, 12, 6) + std(x, 12, 6)", "curve_stall(x + 100, 0.2)",
               "powerlaw_miss(x, 0.2)", "powerlaw_stall(x, 0.2)", "powerlaw_miss(x, 1)",
               "powerlaw_miss(x + 100, 0.2)", "steps_since_change(x)", "episodes(x > 3, 7)"]
RANKS = 5


def signal(expr: str) -> str:
    return re.sub(r"\bx\b", "loss", expr)


def polls(seed: int, n: int) -> List[List[int]]:
    """Per poll, how many new rows each rank has (0: none in that poll)."""
    rng = np.random.default_rng(seed)
    done, out = [0] * RANKS, []
    while min(done) < n:
        sizes = [min(int(rng.choice([0, 1, 1, 1, 2, 5, 30])), n - done[r]) for r in range(RANKS)]
        out.append(sizes)
        done = [d + k for d, k in zip(done, sizes)]
    return out


def run_together(text: str, steps: List[np.ndarray], values: List[list], plan: List[List[int]]
                 ) -> List[np.ndarray]:
    """Values of ``text`` per rank, the ranks of each poll evaluated in one frame."""
    program = Program([])
    root = program.add(parse(signal(text)))
    run = RunContext("r")
    ctxs = []
    for r in range(RANKS):
        ctxs.append(RankContext(run, r, program.new_states(), [math.nan] * len(program.nodes)))
        run.ranks[r] = ctxs[-1]
    pos = [0] * RANKS
    out: List[List[np.ndarray]] = [[] for _ in range(RANKS)]
    for sizes in plan:
        frames, batches, who = [], [], []
        for r, k in enumerate(sizes):
            if not k:
                continue
            a, z = pos[r], pos[r] + k
            pos[r] = z
            chunk = values[r][a:z]
            mask = np.array([v is not None for v in chunk])
            columns: Dict[str, np.ndarray] = {}
            masks: Dict[str, np.ndarray] = {}
            if mask.any():
                columns["loss"] = np.array([np.nan if v is None else v for v in chunk])
                if not mask.all():
                    masks["loss"] = mask
            s = steps[r][a:z]
            batch = StepBatch("r", r, s, s.astype(np.float64), columns, masks)
            frames.append(Frame(s, s.astype(np.float64), batch.t, batch, ctxs[r]))
            batches.append(batch)
            who.append(r)
        if not who:
            continue
        joined = join_batches(batches)
        frame = Frame(joined.steps, joined.steps.astype(np.float64), joined.t, joined, ctxs[0],
                      segments=segments_of(frames))
        failed: Dict[int, str] = {}
        outs = program.evaluate_ranks(frame, [ctxs[r].states for r in who], failed)
        assert not failed, failed
        bounds = frame.segments.bounds
        for k, r in enumerate(who):
            out[r].append(outs[root][0][bounds[k]:bounds[k + 1]].copy())
    return [np.concatenate(o) for o in out]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_an_operator_over_many_ranks_at_once_equals_each_rank_alone(expr):
    series = [make_series(seed=r + 10 * len(expr), n=300, sparse=r % 2 == 1) for r in range(RANKS)]
    steps = [s for s, _ in series]
    values = [v for _, v in series]
    plan = polls(len(expr), 300)
    got = run_together(expr, steps, values, plan)
    if "rank_median" in expr:          # each rank sees the others: compare the whole run
        return _compare_rank_median(expr, steps, values, plan, got)
    for r in range(RANKS):
        alone = run_expr(signal(expr), steps[r], {"loss": values[r]}, [k for p in plan for k in [p[r]] if k])
        np.testing.assert_allclose(got[r], alone, rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=f"{expr}, rank {r}")


def test_spike_periods_of_many_ranks_at_once_equal_each_rank_alone_with_and_without_spikes():
    rng = np.random.default_rng(7)
    steps = [np.arange(1, 401) for _ in range(RANKS)]
    values = []
    for r in range(RANKS):
        loss = 3.0 + 0.01 * rng.standard_normal(400)
        if r % 2 == 0:
            loss[50 + 5 * r::25] += 1.0             # a period of 25 steps on the even ranks
        values.append(loss.tolist())
    plan = polls(11, 400)
    for expr in ("spike_period(x, 200, 10)", "spike_period(x, 500, 10)"):
        got = run_together(expr, steps, values, plan)
        assert all((got[r] == 25.0).any() == (r % 2 == 0) for r in range(RANKS)), expr
        for r in range(RANKS):
            alone = run_expr(signal(expr), steps[r], {"loss": values[r]},
                             [k for p in plan for k in [p[r]] if k])
            np.testing.assert_array_equal(got[r], alone, err_msg=f"{expr}, rank {r}")


def test_power_law_trends_of_many_ranks_at_once_equal_each_rank_alone_bit_for_bit():
    """A falling loss (that stalls on the even ranks): bins close in some polls and not in
    others, with one point, a few or many; every value is the one-rank value, bit for bit."""
    rng = np.random.default_rng(5)
    steps, values = [], []
    for r in range(RANKS):
        gaps = rng.choice([1, 1, 2, 5], size=1500) if r % 2 else np.ones(1500, dtype=np.int64)
        s = np.cumsum(gaps)
        loss = 4.0 * s ** -0.4 * (1 + 0.01 * rng.standard_normal(s.shape[0]))
        if r % 2 == 0:
            stall = 500 + 100 * r
            loss[s > stall] = 4.0 * stall ** -0.4 * (1 + 0.01 * rng.standard_normal((s > stall).sum()))
        steps.append(s)
        values.append(loss.tolist())
    plan = polls(3, 1500)
    for expr in ("powerlaw_miss(x, 0.2)", "powerlaw_stall(x, 0.2)", "powerlaw_miss(x, 1)",
                 "curve_stall(x, 0.1)"):
        got = run_together(expr, steps, values, plan)
        assert ((got[0] > 0.5) & (got[0] < 2)).any(), expr           # the stall is seen
        for r in range(RANKS):
            alone = run_expr(signal(expr), steps[r], {"loss": values[r]},
                             [k for p in plan for k in [p[r]] if k])
            np.testing.assert_array_equal(got[r], alone, err_msg=f"{expr}, rank {r}")


def test_spikes_over_two_records_of_many_ranks_at_once_are_one_onset_as_each_rank_alone():
    rng = np.random.default_rng(8)
    steps = [10 * np.arange(1, 301) for _ in range(RANKS)]
    values = []
    for r in range(RANKS):
        loss = 3.0 + 0.01 * rng.standard_normal(300)
        if r % 2 == 0:                              # every 12 records, each spike two records long
            loss[40 + r::12] += 1.0
            loss[41 + r::12] += 0.8
        values.append(loss.tolist())
    plan = polls(12, 300)
    expr = "spike_period(x - median(x, 20, 4), 500, 10)"
    got = run_together(expr, steps, values, plan)
    assert all((got[r] == 120.0).any() == (r % 2 == 0) for r in range(RANKS))
    for r in range(RANKS):
        alone = run_expr(signal(expr), steps[r], {"loss": values[r]},
                         [k for p in plan for k in [p[r]] if k])
        np.testing.assert_array_equal(got[r], alone, err_msg=f"rank {r}")


def _compare_rank_median(expr, steps, values, plan, got) -> None:
    """rank_median: each rank's row against the others' latest values, computed by hand."""
    latest: Dict[int, float] = {}
    pos = [0] * RANKS
    carried = []                        # the signal: the last recorded value carried forward
    for r in range(RANKS):
        last, row = math.nan, []
        for v in values[r]:
            last = last if v is None else v
            row.append(last)
        carried.append(row)
    for sizes in plan:
        for r, k in enumerate(sizes):
            for i in range(pos[r], pos[r] + k):
                x = carried[r][i]
                pool = [v for q, v in latest.items() if q != r] + [x]
                fin = [v for v in pool if not math.isnan(v)]
                want = float(np.median(fin)) if fin else math.nan
                if not [q for q in latest if q != r]:
                    want = x
                assert got[r][i] == pytest.approx(want, nan_ok=True), (r, i)
            if k:
                latest[r] = carried[r][pos[r] + k - 1]
            pos[r] += k


@pytest.mark.parametrize("first, group_rows, carried",
                         [(40, evaluator.GROUP_ROWS, evaluator.GROUP_CARRIED),
                          (1500, 4000, evaluator.GROUP_CARRIED), (40, evaluator.GROUP_ROWS, 500)],
                         ids=["live poll", "first read of a backlog, in groups",
                              "live poll, in groups by the rows the ranks carry"])
def test_a_poll_of_many_ranks_raises_the_same_alerts_as_the_ranks_one_by_one(
        first, group_rows, carried, monkeypatch):
    monkeypatch.setattr(evaluator, "GROUP_ROWS", group_rows)
    monkeypatch.setattr(evaluator, "GROUP_CARRIED", carried)
    rules = list(load_rules([default_rules_dir()]))
    alone, together = Engine(rules), Engine(rules)
    got_alone, got_together = [], []
    for items in rank_polls(np.random.default_rng(3), 8, 30, lambda r: first + 100 * r,
                            lambda p: [0, 1, 1, 2, 7], 0.03):
        for item in items:
            got_alone += alone.process(*item)
        got_together += together.process_many(items)

    def key(a):
        return (a.alert, a.rank, a.state, a.step, a.first_step)
    assert any(a.alert == "LossNonFinite" for a in got_alone)
    assert sorted(map(key, got_together)) == sorted(map(key, got_alone))
    for r in range(8):
        a, b = alone.runs["run"].ranks[r], together.runs["run"].ranks[r]
        # window sums over a long joined batch round differently: a difference of nearly equal
        # terms (LossPlateau's noise test, ~1e-4 each) may differ by ~1e-12
        np.testing.assert_allclose(b.last, a.last, rtol=1e-6, atol=1e-9, equal_nan=True)
        assert {k: s.state for k, s in a.alerts.items()} == {k: s.state for k, s in b.alerts.items()}


def _carries(ctx) -> List[np.ndarray]:
    return [st[k] for st in ctx.states if isinstance(st, dict) for k in ("s", "v")
            if isinstance(st.get(k), np.ndarray) and st[k].shape[0]]


def test_ranks_that_leave_the_many_rank_polls_keep_copies_of_their_own_still_shared():
    engine = Engine(list(load_rules([default_rules_dir()])))

    def poll(ranks, first, n):
        items = []
        for r in ranks:
            steps = np.arange(first, first + n, dtype=np.int64)
            cols = {"loss": 3.0 / (1 + 0.01 * steps), "grad_norm": np.ones(n)}
            items.append(("run", r, [], StepBatch("run", r, steps, 1.0 * steps, cols, {})))
        engine.process_many(items)

    poll([0, 1, 2], 1, 60)
    poll([0, 1, 2], 61, 1)
    left = engine.runs["run"].ranks[2]
    held = _carries(left)
    assert any(a.base is not None for a in held)          # views of the poll's kept points
    distinct = len({id(a) for a in held})
    poll([0, 1], 62, 1)
    now = _carries(left)
    assert now and all(a.base is None for a in now)        # copies: the poll's arrays can go
    assert len({id(a) for a in now}) == distinct           # operators still share one carry
    for a, b in zip(held, now):
        np.testing.assert_array_equal(a, b)
    assert any(a.base is not None for a in _carries(engine.runs["run"].ranks[0]))


def test_a_poll_splits_its_ranks_once_the_rows_they_carry_reach_the_budget(monkeypatch):
    from msdoctor.core.engine import ranks
    monkeypatch.setattr(evaluator, "GROUP_CARRIED", 1000)
    groups: List[int] = []
    real = ranks.evaluate_ranks

    def spy(engine, ctxs, batches):
        groups.append(len(ctxs))
        return real(engine, ctxs, batches)
    monkeypatch.setattr(ranks, "evaluate_ranks", spy)
    engine = Engine(list(load_rules([default_rules_dir()])))
    for items in rank_polls(np.random.default_rng(5), 8, 6, lambda r: 300, lambda p: [1], 0.0):
        engine.process_many(items)
    assert engine.runs["run"].ranks[0].rows == 305
    # 8 ranks carrying ~300 rows each: at most 3 of them (~900 rows) per evaluation
    assert groups[-3:] == [3, 3, 2]

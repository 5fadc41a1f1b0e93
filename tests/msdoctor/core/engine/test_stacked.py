"""Operator states saved as columns come back as saving them rank by rank gives them."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from msdoctor.core.engine.context import pack, unpack
from msdoctor.core.engine.stacked import stack, unstack
from msdoctor.core.snapshot import join_arrays, split_arrays


def rank_states(r: int):
    """A rank's (operator, state) pairs: windows, floats (non-finite too), counts, and the
    odd kinds a column cannot hold (mixed across ranks, nested, bools, 2-D)."""
    rng = np.random.default_rng(r)
    out = [(0, {"s": np.arange(r, r + 5 + r % 3), "v": rng.random(5 + r % 3), "last": 1.5 * r}),
           (3, {"last": [math.nan, math.inf, 2.0][r % 3], "n": r, "big": 2 ** 70 if r == 2 else r}),
           (4, {"flag": bool(r % 2), "m": np.ones((2, 2)) * r, "b": np.array([True, r % 2 == 0]),
                "mixed": np.arange(3) if r % 2 else np.arange(3.0), "nested": {"a": [r, 2.5]},
                "f32": np.arange(2, dtype=np.float32) + r, "z": np.float64(r) / 3}),
           (7, {"empty": np.zeros(0)})]
    return out if r != 1 else out[:2]           # rank 1 lacks two operators' states


def same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and np.array_equal(a, b, equal_nan=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def test_columns_through_the_snapshot_come_back_as_rank_by_rank_states_unpack():
    ranks = [rank_states(r) for r in range(6)]
    back = unstack(saved(stack(ranks)), len(ranks))
    for r, states in enumerate(ranks):
        want = [[i, unpack(s)] for i, s in saved([[i, pack(s)] for i, s in states])]
        assert same(back[r], want), r


def saved(doc):
    """``doc`` through the snapshot (arrays apart, the rest as JSON) and back."""
    doc, arrays = split_arrays(doc)
    return join_arrays(json.loads(json.dumps(doc)), arrays)


def test_windows_floats_and_counts_become_one_array_per_column_not_one_per_rank():
    columns = {(c["op"], c["key"]): c for c in stack([rank_states(r) for r in range(100)])}
    assert columns[(0, "s")]["a"].shape == (sum(5 + r % 3 for r in range(100)),)
    assert columns[(0, "last")]["f"].dtype == np.float64
    assert columns[(3, "n")]["i"].dtype == np.int64
    assert "x" in columns[(3, "big")] and "x" in columns[(4, "flag")]    # kept as they are
    assert "x" in columns[(4, "mixed")] and "x" in columns[(4, "m")]


@pytest.mark.parametrize("damage, match", [
    (lambda c: c.update(at=np.array([0, 9])), "does not fit 3 ranks"),
    (lambda c: c.update(n=np.array([1, 1])), "do not fit"),
    (lambda c: c.update(at=np.array([0])), "do not fit"),
    (lambda c: c.update(op="0"), "does not fit"),
])
def test_a_damaged_column_is_a_value_error_naming_it(damage, match):
    columns = stack([[(0, {"s": np.arange(2)})], [(0, {"s": np.arange(3)})],
                     [(0, {"s": np.arange(1)})]])
    damage(columns[0])
    with pytest.raises(ValueError, match=match):
        unstack(columns, 3)


def test_a_column_equal_to_an_earlier_one_refers_to_it_and_comes_back_whole():
    ranks = [[(0, {"s": np.arange(r, r + 4), "v": np.arange(4.0) * r}),
              (5, {"s": np.arange(r, r + 4), "v": np.arange(4.0) * r + 1})] for r in range(3)]
    columns = stack(ranks)
    by = {(c["op"], c["key"]): c for c in columns}
    assert by[(5, "s")]["like"] == columns.index(by[(0, "s")]) and "a" not in by[(5, "s")]
    assert "a" in by[(5, "v")]                               # equal only in length: kept
    back = unstack(saved(columns), 3)
    for r in range(3):
        assert [s["s"].tolist() for _, s in back[r]] == [list(range(r, r + 4))] * 2
        assert back[r][1][1]["v"].tolist() == (np.arange(4.0) * r + 1).tolist()
        assert back[r][0][1]["s"] is back[r][1][1]["s"]     # window carries: held once again
    by[(5, "s")]["like"] = columns.index(by[(5, "s")])       # itself: a column without arrays
    with pytest.raises(ValueError, match="holds no arrays"):
        unstack(columns, 3)


def test_arrays_that_several_operators_hold_are_saved_once_and_come_back_held_once():
    shared = [(np.arange(r, r + 6), np.arange(6.0) + r) for r in range(4)]
    ranks = [[(0, {"s": shared[r][0], "v": shared[r][1], "first": 1.0 * r}),
              (2, {"s": shared[r][0], "v": shared[r][1], "last": 2.0}),
              (9, {"s": shared[r][0].copy(), "v": shared[r][1] + (r == 3)})] for r in range(4)]
    ranks[2] = ranks[2][:2]                                  # rank 2 lacks operator 9
    columns = stack(ranks)
    by = {(c["op"], c["key"]): c for c in columns}
    assert by[(2, "s")]["like"] == columns.index(by[(0, "s")])    # the same arrays: by identity
    assert by[(2, "v")]["like"] == columns.index(by[(0, "v")])
    assert "a" in by[(9, "v")]                               # rank 3 differs: its own column
    back = unstack(saved(columns), 4)
    for r in range(4):
        want = [[i, {k: pack(v) for k, v in st.items()}] for i, st in ranks[r]]
        assert same(back[r], want), r
        assert back[r][0][1]["v"] is back[r][1][1]["v"]     # as when saved: one array


def test_equal_arrays_other_than_window_carries_come_back_as_copies_each():
    """Only carries (never written in place) are shared again; any other array state may be
    changed in place by its operator, so each gets its own."""
    ranks = [[(0, {"sums": np.arange(4.0) + r}), (1, {"sums": np.arange(4.0) + r})]
             for r in range(3)]
    columns = stack(ranks)
    assert "like" in columns[1]
    back = unstack(saved(columns), 3)
    for r in range(3):
        assert back[r][0][1]["sums"].tolist() == back[r][1][1]["sums"].tolist()
        assert not np.shares_memory(back[r][0][1]["sums"], back[r][1][1]["sums"])


def test_a_column_held_by_identity_of_a_column_equal_to_an_earlier_one_refers_to_the_first():
    early = [np.arange(r, r + 5) for r in range(3)]
    equal = [a.copy() for a in early]                        # equal values, other objects
    ranks = [[(0, {"s": early[r]}), (1, {"s": equal[r]}), (2, {"s": equal[r]})] for r in range(3)]
    columns = stack(ranks)
    by = {c["op"]: c for c in columns}
    assert by[1]["like"] == columns.index(by[0]) and by[2]["like"] == columns.index(by[0])
    back = unstack(saved(columns), 3)
    for r in range(3):
        assert [st["s"].tolist() for _, st in back[r]] == [early[r].tolist()] * 3

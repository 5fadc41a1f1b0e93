"""The store's per-layer rows: kept per rank from ``layers`` events, bounded in cells,
"not measured" kept apart from NaN, a resumed run's repeated steps replaced."""
from __future__ import annotations

import math

from msdoctor.core.layer_rows import CELLS, LayerRows, column


def event(step, names, grads, acts=None):
    e = {"type": "layers", "step": step, "t": 100.0 + step, "names": names, "grad_norm": grads}
    if acts is not None:
        e["act_max"] = acts
    return e


def test_rows_keep_each_step_with_not_measured_apart_from_nan():
    rows = LayerRows()
    rows.note(event(1, ["a", "b"], [1.0, 2.0], [None, 3.0]))
    rows.note(event(2, ["a", "b"], [math.nan, 2.0], [None, math.inf]))
    values, measured = column(rows.window(0, 10), "act_max", 2)
    assert measured.tolist() == [[False, True], [False, True]]
    assert values[1, 1] == math.inf
    grads, known = column(rows.window(0, 10), "grad_norm", 2)
    assert math.isnan(grads[1, 0]) and known.all()
    assert rows.signals() == ["grad_norm", "act_max"]


def test_rows_are_bounded_by_cells_whatever_the_layer_count():
    rows = LayerRows()
    names = [f"layers.{i}" for i in range(1000)]
    for s in range(1, 40):
        rows.note(event(s, names, [1.0] * 1000))
    assert len(rows) == CELLS // 1000
    assert rows.window(0, 5)[-1].step == 39


def test_a_repeated_step_replaces_the_rows_from_it_and_new_names_start_afresh():
    rows = LayerRows()
    for s in (1, 2, 3, 2):
        rows.note(event(s, ["a"], [float(s)]))
    assert [r.step for r in rows.window(0, 10)] == [1, 2] and rows.repeated == 2
    rows.note(event(3, ["a", "b"], [1.0, 1.0]))
    assert rows.names == ("a", "b") and len(rows) == 1

"""``curve_stall`` against a np.polyfit reference, over many batch cuts and a state snapshot."""
from __future__ import annotations

import json
import math
from typing import List, Optional

import numpy as np
import pytest

from msdoctor.core.batch import columnize
from msdoctor.core.engine import curve
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import load_rules
from msdoctor.core.snapshot import join_arrays, split_arrays
from msdoctor.wire import make
from tests.msdoctor.core.engine.helpers import binned_reference, run_expr
from tests.msdoctor.core.engine.test_windows import SIZES, make_series


def _stall_reference(steps, values, f: float) -> np.ndarray:
    """Per row: the parabola of the 40 closed log-step bins before the 8 newest closed ones
    (bins of log(1 + f) / 8), with np.polyfit; excess over the fall from the recent window's
    start when both are significant, the residual variance at least the groups of 2 bins'."""
    w = math.log1p(f) / curve.BINS_RECENT
    span, hist_bins = curve.BINS_RECENT + curve.BINS_HISTORY, curve.BINS_HISTORY

    def fit(before, newest):
        first = newest - span + 1                       # the window's oldest bin
        edge = (newest - curve.BINS_RECENT + 1) * w
        hist = np.array([(u, y, k) for u, y, k in before if first <= k < first + hist_bins])
        rec = np.array([(u, y) for u, y, k in before if k >= first + hist_bins])
        full = any(first <= k < first + hist_bins // 4 for _, _, k in before)
        if not full or len(hist) < curve.MIN_HISTORY or len(rec) < curve.MIN_RECENT:
            return math.nan
        z = hist[:, 0] - edge
        coef = np.polyfit(z, hist[:, 1], 2)
        res = hist[:, 1] - np.polyval(coef, z)
        var = (res ** 2).sum() / max(len(hist) - 3, 1)
        groups = (hist[:, 2].astype(int) - first) // curve.GROUP
        means = [(np.sum(groups == g), res[groups == g].mean()) for g in np.unique(groups)]
        if len(means) > 3:
            var = max(var, sum(n * r * r for n, r in means) / (len(means) - 3))
        var = max(var, 1e-18)
        x = np.column_stack((np.ones(len(z)), z, z * z))
        zr = rec[:, 0] - edge
        xr = np.array([1.0, zr.mean(), (zr * zr).mean()])
        pred = float(np.polyval(coef, 0.0) + coef[1] * xr[1] + coef[0] * xr[2])
        se = math.sqrt(var * (float(xr @ np.linalg.inv(x.T @ x) @ xr) + 1 / len(rec)))
        fall, excess = coef[2] - pred, rec[:, 1].mean() - pred
        ok = fall >= curve.FALL_Z * se and excess >= curve.EXCESS_Z * se
        return excess / fall if ok else 0.0

    return binned_reference(steps, values, w, fit)


def _stalling(seed: int, sparse: bool, n: int = 500):
    rng = np.random.default_rng(seed)
    steps, _ = make_series(seed=seed + 1, n=n, sparse=sparse, holes=False)
    loss = 6.0 * steps.astype(float) ** -0.3 * np.exp(0.005 * rng.standard_normal(steps.shape[0]))
    stop = steps.shape[0] * 3 // 4
    loss[stop:] = loss[stop - 1] * np.exp(0.005 * rng.standard_normal(steps.shape[0] - stop))
    values: List[Optional[float]] = list(loss)
    values[7] = None
    values[20] = math.nan
    values[30] = -1.0                                   # not positive: skipped
    return steps, values, stop


@pytest.mark.parametrize("sparse", [False, True])
def test_curve_stall_matches_a_polyfit_reference_for_every_batch_cut(sparse):
    steps, values, stop = _stalling(3, sparse)
    expected = _stall_reference(steps, values, 0.2)
    for sizes in SIZES:
        got = run_expr("curve_stall(loss, 0.2)", steps, {"loss": values}, sizes)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6, equal_nan=True,
                                   err_msg=str(sizes))
    assert np.isfinite(expected).sum() > 100
    assert np.nanmax(expected[stop:]) > 0.6 and np.nanmax(expected[:stop]) < 0.6


def test_curve_stall_sees_a_late_stall_and_not_a_power_law_slowing_down():
    rng = np.random.default_rng(1)
    steps = np.arange(1, 6001)
    healthy = (1.5 + 9.0 * (1 + steps / 20.0) ** -0.5) * (1 + 0.002 * rng.standard_normal(6000))
    flat = healthy.copy()
    flat[4000:] = (1.5 + 9.0 * (1 + 4000 / 20.0) ** -0.5) * (1 + 0.002 * rng.standard_normal(2000))
    for loss, stalls in ((healthy, False), (flat, True)):
        got = run_expr("curve_stall(loss, 0.1)", steps, {"loss": list(loss)}, [500])
        assert (got[4000:4400] > 0.6).any() == stalls and not (got[:4000] > 0.6).any()
        assert np.isnan(got[:20]).all()



@pytest.mark.parametrize("cuts", [[500], [1, 7, 64], [6000]])
def test_curve_stall_from_a_step_is_nan_before_its_bin_and_the_same_from_then_on(cuts):
    rng = np.random.default_rng(2)
    steps = np.arange(1, 6001)
    loss = list((1.5 + 9.0 * (1 + steps / 20.0) ** -0.5) * (1 + 0.002 * rng.standard_normal(6000)))
    loss[4000:] = [loss[3999]] * 2000
    every = run_expr("curve_stall(loss, 0.1)", steps, {"loss": loss}, cuts)
    late = run_expr("curve_stall(loss, 0.1, 2000)", steps, {"loss": loss}, cuts)
    start = int(np.exp(np.floor(np.log(2000) / curve.bin_width(0.1)) * curve.bin_width(0.1)))
    assert np.isnan(late[:start - 1]).all()
    np.testing.assert_array_equal(late[2000:], every[2000:])
    assert (late[4000:4400] > 0.6).any()

RULE = """
version: 1
groups:
  - name: g
    rules:
      - alert: Stalled
        expr: curve_stall(loss, 0.2) > 0.6
        labels: {severity: warning}
        annotations: {summary: "{{ $value }}"}
"""


def test_curve_stall_resumes_from_its_saved_state(tmp_path):
    """The engine's state, split into arrays and JSON as the snapshot stores it, resumes the
    bins: the same transitions as one engine over the whole run."""
    path = tmp_path / "r.yaml"
    path.write_text(RULE)
    rules = load_rules([path])
    steps, values, _ = _stalling(5, False)
    batch = columnize("r", 0, [make("step", 0, run="r", step=int(s), t=float(s), loss=v)
                               for s, v in zip(steps, values) if v is not None])
    straight: list = []
    Engine(rules, sinks=[straight.append]).process("r", 0, [], batch)
    first: list = []
    e1 = Engine(rules, sinks=[first.append])
    e1.process("r", 0, [], batch.slice(0, 300))
    doc, arrays = split_arrays(e1.state_dict())
    state = join_arrays(json.loads(json.dumps(doc, allow_nan=False)),
                        {k: v.copy() for k, v in arrays.items()})
    e2 = Engine(rules, sinks=[first.append])
    e2.load_state_dict(state)
    e2.process("r", 0, [], batch.slice(300, len(batch)))
    assert [a.to_dict() for a in first] == [a.to_dict() for a in straight]
    assert any(a.to_dict()["state"] == "firing" for a in straight)

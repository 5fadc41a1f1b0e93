"""DoctorTrainOneStepCell trains on CPU in GRAPH mode, detects overflow, skips it, and reports the norm."""
from __future__ import annotations

import math

import numpy as np
import pytest

from msdoctor.wire import decode
from trainer_hooks import toy
from trainer_hooks.emitter import spool_path

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("in_tmp_dir")]
ms = pytest.importorskip("mindspore")
from mindspore import nn  # noqa: E402
from mindspore.train import Callback, Model  # noqa: E402

from trainer_hooks.cell import DoctorTrainOneStepCell  # noqa: E402


class Recorder(Callback):
    """Keeps a host copy of every trainable weight and the decoded outputs after each step."""

    def __init__(self, params) -> None:
        super().__init__()
        self.params = list(params)
        self.weights = {}
        self.outputs = {}

    def on_train_step_end(self, run_context):
        args = run_context.original_args()
        self.weights[args.cur_step_num] = [p.asnumpy().copy() for p in self.params]
        self.outputs[args.cur_step_num] = [o.asnumpy() for o in args.net_outputs]


def update_norm(before, after) -> float:
    return math.sqrt(sum(float(np.square(a.astype(np.float64) - b).sum()) for a, b in zip(after, before)))


def test_an_inf_input_is_reported_as_overflow_the_update_is_skipped_and_the_scale_halves(
        scaled_toy, tmp_path):
    recorder = Recorder(scaled_toy.network.trainable_params())
    toy.train(str(tmp_path), 14, toy=scaled_toy, inject_nan_at=10, callbacks=[recorder],
              hook_options={"update_every": 5})
    events = {e["step"]: e for e in map(decode, open(spool_path(str(tmp_path), 0), "rb"))
              if e["type"] == "step"}
    bad, before = events[10], events[9]
    assert bad["overflow"] is True and math.isnan(bad["loss"]) and math.isnan(bad["grad_norm"])
    assert bad["loss_scale"] == before["loss_scale"] / 2
    assert bad["update_ratio"] == 0.0  # sampled on step 10: nothing moved
    assert update_norm(recorder.weights[9], recorder.weights[10]) == 0.0
    assert all(events[s]["overflow"] is False for s in (9, 11, 12, 13, 14))
    assert update_norm(recorder.weights[10], recorder.weights[11]) > 0
    assert math.isfinite(events[11]["loss"]) and events[14]["loss_scale"] == bad["loss_scale"]


def sgd_setup(scale_sense, clip_norm, optimizer=nn.SGD, lr=0.1):
    ms.set_context(mode=ms.GRAPH_MODE)
    network = toy._network_class()(toy.ToyConfig())
    optimizer = optimizer(network.trainable_params(), learning_rate=lr)
    cell = DoctorTrainOneStepCell(network, optimizer, scale_sense=scale_sense, clip_norm=clip_norm)
    return network, Model(cell)


@pytest.mark.parametrize("scale_sense, clip_norm", [
    (None, None),                                          # no loss scaling, no clipping
    (nn.DynamicLossScaleUpdateCell(2 ** 16, 2, 1000), None),  # norm is taken after unscaling
    (1.0, 0.01),                                           # clipped to a global norm of 0.01
], ids=["unscaled", "dynamic-scale", "clipped"])
def test_the_global_norm_is_the_unscaled_gradient_norm_and_clipping_bounds_the_update(
        scale_sense, clip_norm, tmp_path):
    network, model = sgd_setup(scale_sense, clip_norm)
    recorder = Recorder(network.trainable_params())
    model.train(1, toy.dataset(4), callbacks=[recorder])
    for step in (2, 3, 4):
        loss, overflow, scale, lr, norm = recorder.outputs[step]
        assert not overflow and lr == pytest.approx(0.1)
        moved = update_norm(recorder.weights[step - 1], recorder.weights[step])
        # plain SGD: w -= lr * g, so |dw| = lr * |g| (or lr * clip_norm when clipped)
        expected = 0.1 * (min(float(norm), clip_norm) if clip_norm else float(norm))
        assert moved == pytest.approx(expected, rel=1e-3)
        assert float(scale) == (2 ** 16 if isinstance(scale_sense, nn.Cell) else 1.0)
    assert float(recorder.outputs[4][4]) > 0.01  # so the clipped case really clipped


def test_a_fixed_scale_of_one_trains_and_the_loss_falls(tmp_path):
    network, model = sgd_setup(None, 1.0, optimizer=nn.Adam, lr=1e-2)
    recorder = Recorder(network.trainable_params())
    model.train(1, toy.dataset(30), callbacks=[recorder])
    losses = [float(recorder.outputs[s][0]) for s in sorted(recorder.outputs)]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5


@pytest.mark.parametrize("kwargs, message", [
    ({"scale_sense": 0.0}, "scale_sense must be a positive number"),
    ({"clip_norm": -1.0}, "clip_norm must be a positive number or None"),
])
def test_bad_arguments_name_the_value_and_the_expected_form(kwargs, message):
    network = toy._network_class()(toy.ToyConfig())
    optimizer = nn.SGD(network.trainable_params(), learning_rate=0.1)
    with pytest.raises(ValueError, match=message):
        DoctorTrainOneStepCell(network, optimizer, **kwargs)

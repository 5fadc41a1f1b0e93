"""The update-ratio sampler and the host-side learning-rate reader, on real MindSpore objects."""
from __future__ import annotations

import math

import numpy as np
import pytest

from trainer_hooks.sampler import UpdateSampler, lr_reader, relative_change

ms = pytest.importorskip("mindspore")
from mindspore import Parameter, Tensor, nn  # noqa: E402


def test_relative_change_is_the_norm_of_the_difference_over_the_norm_before():
    before = [np.array([3.0, 0.0]), np.array([[0.0], [4.0]])]
    after = [np.array([3.0, 0.5]), np.array([[0.0], [4.0]])]
    assert relative_change(before, after) == pytest.approx(0.5 / 5.0)
    assert relative_change(before, before) == 0.0
    assert relative_change([np.zeros(3)], [np.ones(3)]) is None
    assert relative_change(before, after[:1]) is None
    assert math.isnan(relative_change([np.ones(2)], [np.array([1.0, np.inf])]))


def params(*shapes):
    return [Parameter(Tensor(np.random.default_rng(i).normal(size=s).astype(np.float32)), f"p{i}")
            for i, s in enumerate(shapes)]


def test_up_to_four_matrices_spread_over_the_network_are_sampled_in_bounded_slices():
    ps = params((10,), (1000, 100), (8,), (20, 20), (30, 30), (40, 40), (50, 50), (3, 3))
    sampler = UpdateSampler(ps, every=5, count=4, max_elements=1000)
    # six matrices (p1, p3..p7): four picked evenly, first and last included; vectors skipped
    assert [p.name for p in sampler.params] == ["p1", "p4", "p5", "p7"]
    sizes = [s.size for s in sampler.read()]
    assert sizes[0] == 1000  # 10 rows of the 1000x100 matrix, not 100k values


def test_the_ratio_appears_on_sampled_steps_only_and_measures_the_change_since_the_step_before():
    (weight,) = params((50, 20))
    sampler = UpdateSampler([weight], every=5)
    seen = {}
    for step in range(1, 12):
        weight.set_data(Tensor(weight.asnumpy() * 1.01))  # the "optimizer step"
        ratio = sampler.after_step(step)
        if ratio is not None:
            seen[step] = ratio
    assert sorted(seen) == [5, 10]
    assert all(r == pytest.approx(0.01, rel=1e-3) for r in seen.values())


def test_a_sink_of_several_steps_reports_the_ratio_per_step():
    (weight,) = params((50, 20))
    sampler = UpdateSampler([weight], every=4)
    ratios = []
    for step in (2, 4, 6, 8):  # one callback per 2 steps
        weight.set_data(Tensor(weight.asnumpy() * 1.02))
        ratios.append(sampler.after_step(step, delta=2))
    assert ratios[0] is None and ratios[1] == pytest.approx(0.01, rel=1e-3)


def test_the_lr_reader_follows_fixed_rates_lists_and_groups_and_skips_schedules():
    net = nn.Dense(4, 2)
    fixed = nn.SGD(net.trainable_params(), learning_rate=0.5)
    read = lr_reader(fixed)
    assert read(1) == 0.5
    fixed.learning_rate.set_data(Tensor(np.float32(0.25)))
    assert read(7) == 0.25
    listed = lr_reader(nn.SGD(net.trainable_params(), learning_rate=[0.1, 0.2, 0.3]))
    assert [round(listed(s), 6) for s in (1, 2, 3, 9)] == [0.1, 0.2, 0.3, 0.3]
    schedule = nn.CosineDecayLR(0.0, 0.1, 10)
    assert lr_reader(nn.SGD(net.trainable_params(), learning_rate=schedule)) is None
    groups = [{"params": [net.weight], "lr": 0.01}, {"params": [net.bias], "lr": 0.02}]
    assert lr_reader(nn.SGD(groups, learning_rate=0.1))(1) == pytest.approx(0.01)


def test_reading_on_the_host_gives_the_same_slices_as_slicing_on_the_device_and_owns_them():
    ps = params((1000, 100), (20, 20))
    on_host = UpdateSampler(ps, every=5, max_elements=1000, on_host=True).read()
    on_device = UpdateSampler(ps, every=5, max_elements=1000, on_host=False).read()
    assert [a.size for a in on_host] == [1000, 400]
    for a, b in zip(on_host, on_device):
        np.testing.assert_array_equal(a, b)
    before = on_host[0].copy()
    ps[0].set_data(Tensor(np.zeros((1000, 100), dtype=np.float32)))   # the weights move
    np.testing.assert_array_equal(on_host[0], before)                  # a copy, not a view


def test_on_the_cpu_backend_the_sampler_reads_on_the_host_by_default():
    assert ms.get_context("device_target") == "CPU"
    assert UpdateSampler(params((4, 4)), every=5).on_host is True

"""Shared, compiled-once toy training setups (GRAPH mode on CPU) for the hooks' tests."""
from __future__ import annotations

import pytest


@pytest.fixture()
def in_tmp_dir(tmp_path, monkeypatch):
    """MindSpore may write kernel_meta/, rank_*/ into the CWD: keep it in the test's tmp dir."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def plain_toy():
    """The toy LM with MindSpore's plain TrainOneStepCell (net_outputs: the loss Tensor)."""
    toy = pytest.importorskip("trainer_hooks.toy")
    return toy.build()


@pytest.fixture(scope="session")
def scaled_toy():
    """The toy LM with DoctorTrainOneStepCell and a dynamic loss scale (2**16, x2, window 1000)."""
    toy = pytest.importorskip("trainer_hooks.toy")
    return toy.build(loss_scale=True)

"""`import trainer_hooks` is cheap; its public names load on first use."""
from __future__ import annotations

import pytest

import trainer_hooks


def test_the_callback_and_cell_load_lazily_as_mindspore_classes():
    ms_train = pytest.importorskip("mindspore.train")
    from mindspore import nn

    from trainer_hooks import DoctorCallback, DoctorTrainOneStepCell

    assert issubclass(DoctorCallback, ms_train.Callback)
    assert issubclass(DoctorTrainOneStepCell, nn.TrainOneStepWithLossScaleCell)
    assert "DoctorCallback" in dir(trainer_hooks)


def test_an_unknown_name_says_which_names_exist():
    with pytest.raises(AttributeError, match="expected one of DoctorCallback"):
        trainer_hooks.NoSuchThing  # noqa: B018

"""net_outputs are decoded by shape; token counts come from 2-D integer inputs only."""
from __future__ import annotations

import math

import numpy as np
import pytest

from trainer_hooks.outputs import decode_outputs, input_tokens

ms = pytest.importorskip("mindspore")
T = ms.Tensor


def decoded(outputs) -> dict:
    event: dict = {}
    decode_outputs(outputs, event)
    return event


def test_a_tensor_is_the_loss():
    assert decoded(T(np.float32(2.5))) == {"loss": 2.5}
    assert decoded(T(np.array([1.0, 3.0], np.float32))) == {"loss": 2.0}


def test_a_3_tuple_is_loss_overflow_and_loss_scale():
    event = decoded((T(np.float32(1.5)), T(np.array(True)), ms.Parameter(T(np.float32(1024.0)), "s")))
    assert event == {"loss": 1.5, "overflow": True, "loss_scale": 1024.0}


def test_a_5_tuple_is_the_mindformers_layout_and_a_missing_norm_is_omitted():
    loss, flag = T(np.float32(1.0)), T(np.array(False))
    full = decoded((loss, flag, T(np.float32(1.0)), T(np.float32(3e-4)), T(np.array([0.7], np.float32))))
    assert full["overflow"] is False and full["lr"] == pytest.approx(3e-4)
    assert full["grad_norm"] == pytest.approx(0.7)
    assert "grad_norm" not in decoded((loss, flag, T(np.float32(1.0)), T(np.float32(3e-4)), None))
    seven = decoded((loss, flag, T(np.float32(1.0)), T(np.float32(1e-3)), T(np.float32(2.0)),
                     T(np.ones(4, np.float32)), T(np.int32(4))))
    assert seven["grad_norm"] == 2.0 and set(seven) == {"loss", "overflow", "loss_scale", "lr", "grad_norm"}


def test_other_tuples_give_only_their_first_element_as_the_loss():
    assert decoded((T(np.float32(0.25)), {"w": T(np.ones(2, np.float32))})) == {"loss": 0.25}
    assert decoded(()) == {}


def test_a_nan_loss_is_kept_as_nan_not_dropped():
    assert math.isnan(decoded(T(np.float32("nan")))["loss"])


@pytest.mark.parametrize("element, tokens", [
    ((T(np.zeros((8, 32), np.int32)), T(np.zeros((8, 32), np.int32))), 256),
    ((np.zeros((4, 1024), np.int64),), 4096),
    ((T(np.zeros((8, 32), np.float32)),), None),       # not token ids
    ((T(np.zeros((8, 3, 32, 32), np.int32)),), None),  # images
    ((), None),
    (None, None),
], ids=["int32-ids", "numpy-int64", "float", "4-d", "empty", "none"])
def test_tokens_are_batch_times_sequence_of_2d_integer_ids(element, tokens):
    assert input_tokens(element) == tokens


def test_tokens_per_batch_can_be_read_from_a_datasets_declared_columns():
    from trainer_hooks import toy
    from trainer_hooks.outputs import dataset_tokens

    assert dataset_tokens(toy.dataset(2)) == 8 * 32
    assert dataset_tokens(object()) is None

"""Parameters grouped into layers in forward order, and the pre-flight facts read from them."""
from __future__ import annotations

import numpy as np
from mindspore import Parameter, Tensor

from trainer_hooks.layers import group, layer_of, membership
from trainer_hooks.preflight import embedding_rows, layers_at_init

NAMES = ["model.layers.1.attention.wq.weight", "lm_head.weight", "model.norm_out.weight",
         "model.tok_embeddings.embedding_weight", "model.layers.0.ffn_norm.weight",
         "model.layers.10.attention_norm.weight"]


def test_parameters_fall_into_embedding_blocks_by_number_other_modules_then_the_head():
    assert layer_of("model.layers.12.feed_forward.w1.weight") == "layers.12"
    layers, index = group(NAMES)
    assert layers == ["embedding", "layers.0", "layers.1", "layers.10", "norm_out", "lm_head"]
    assert [layers[i] for i in index] == ["layers.1", "lm_head", "norm_out", "embedding",
                                          "layers.0", "layers.10"]
    _, matrix = membership(NAMES)
    assert matrix.shape == (6, 6) and (matrix.sum(axis=1) == 1).all()


def weights(norm_of_block_1: float) -> list:
    rng = np.random.default_rng(0)
    params = [Parameter(Tensor(rng.normal(0, 0.02, (64, 16)).astype(np.float32)),
                        name="model.tok_embeddings.embedding_weight")]
    for block, gain in ((0, 1.0 + rng.normal(0, 0.01, 16)), (1, np.full(16, norm_of_block_1))):
        params.append(Parameter(Tensor(gain.astype(np.float32)),
                                name=f"model.layers.{block}.attention_norm.weight"))
        params.append(Parameter(Tensor(rng.normal(0, 0.02, (16, 16)).astype(np.float32)),
                                name=f"model.layers.{block}.attention.wq.weight"))
    return params


def test_a_block_whose_norm_gains_are_still_constant_among_trained_ones_is_named():
    assert layers_at_init(weights(1.0)) == ["layers.1"]
    assert embedding_rows(weights(1.0)) == 64


def test_a_fresh_model_with_every_gain_constant_names_no_layer():
    params = weights(1.0)
    params[1] = Parameter(Tensor(np.ones(16, np.float32)), name=params[1].name)
    assert layers_at_init(params) == []

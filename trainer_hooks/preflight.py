"""Pre-flight facts the hooks declare in ``run_start.config``, read once before step 1.

- ``embedding_rows``: rows of the token embedding (the rules compare it with the tokenizer's
  vocabulary, ``tokenizer_vocab_size``, when the run declares it);
- ``layers_at_init`` / ``layers_at_init_names``: layers whose every 1-D parameter (RMSNorm /
  LayerNorm gains, biases) is still exactly constant, as an initializer leaves it, while other
  layers' are not: after loading a checkpoint, the keys of those layers were not loaded (any
  training step moves a norm gain off its constant). A model that is all at init (a fresh run)
  declares none. Each parameter is read through a bounded slice, so the cost does not grow with
  the model.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np

from trainer_hooks.layers import group

#: Elements read per parameter.
SLICE = 4096


def _head(param: Any) -> np.ndarray:
    shape = tuple(getattr(param, "shape", ()))
    if len(shape) == 1 and shape[0] > SLICE:
        param = param[:SLICE]
    return np.asarray(param.asnumpy()).reshape(-1)[:SLICE]


def embedding_rows(params: Sequence[Any]) -> int:
    """Rows of the embedding table (0 when none is found)."""
    names = [str(p.name) for p in params]
    layers, index = group(names)
    for param, i in zip(params, index):
        if layers[i] == "embedding" and len(param.shape) == 2:
            return int(param.shape[0])
    return 0


def layers_at_init(params: Sequence[Any]) -> List[str]:
    """Layers (forward order) whose 1-D parameters are all exactly constant while another
    layer's are not; [] when no layer or every layer is at init."""
    names = [str(p.name) for p in params]
    layers, index = group(names)
    constant: Dict[int, bool] = {}
    for param, i in zip(params, index):
        if len(param.shape) != 1:
            continue
        head = _head(param)
        flat = bool(head.size) and bool(np.all(head == head[0]))
        constant[i] = constant.get(i, True) and flat
    if not constant or all(constant.values()):
        return []
    return [layers[i] for i in sorted(constant) if constant[i]]


def facts(params: Sequence[Any]) -> Dict[str, Any]:
    """The pre-flight keys for ``run_start.config``."""
    found: Dict[str, Any] = {}
    rows = embedding_rows(params)
    if rows:
        found["embedding_rows"] = rows
    at_init = layers_at_init(params)
    found["layers_at_init"] = len(at_init)
    if at_init:
        found["layers_at_init_names"] = at_init
    return found


def checkpoint_facts(path: str) -> Dict[str, Any]:
    """:func:`facts` of a MindSpore checkpoint file's model weights (imports MindSpore)."""
    import mindspore as ms

    params = [p for name, p in ms.load_checkpoint(path).items()
              if not name.startswith(_NOT_WEIGHTS) and hasattr(p, "shape")]
    return facts(params)


_NOT_WEIGHTS = ("adam_", "moment", "accum", "doctor_", "global_step", "scale_sense", "step",
                "data_offset", "learning_rate", "current_iterator_step", "last_overflow_iterator_step",
                "epoch_num")


if __name__ == "__main__":   # ``msdoctor preflight --checkpoint``: one JSON line on stdout
    import json
    import sys

    print(json.dumps(checkpoint_facts(sys.argv[1])))

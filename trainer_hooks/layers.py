"""Parameters grouped into layers in forward order, and the ``layers`` event built from them.

Standard library and numpy only (no MindSpore): the train cell, the callback and the tests share
the grouping. A parameter's layer is its decoder block (``layers.3``, from ``...layers.3...``), the
embedding (a name containing ``embed``), the output head (``lm_head`` / ``output``), or else the
module that holds it (e.g. ``norm_out``). Forward order: embedding, blocks by number, other
modules in first-seen order, the head.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

_BLOCK = re.compile(r"(?:^|\.)(?:layers|layer|blocks|h)\.(\d+)(?:\.|$)")
_HEAD = ("lm_head", "output_layer", "head")


def layer_of(name: str) -> str:
    """The layer a parameter named ``name`` belongs to (see module docstring)."""
    block = _BLOCK.search(name)
    if block:
        return f"layers.{int(block.group(1))}"
    parts = [p for p in name.split(".") if p not in ("model", "network", "backbone", "_backbone")]
    if any("embed" in p for p in parts):
        return "embedding"
    if parts and parts[0] in _HEAD:
        return "lm_head"
    return parts[0] if len(parts) > 1 else (parts[0] if parts else name)


def _order(layer: str, seen: int) -> Tuple[int, int]:
    if layer == "embedding":
        return (0, 0)
    if layer.startswith("layers."):
        return (1, int(layer.split(".")[1]))
    if layer == "lm_head":
        return (3, 0)
    return (2, seen)


def group(names: Sequence[str]) -> Tuple[List[str], List[int]]:
    """``(layer names in forward order, the layer index of each parameter)``."""
    first: Dict[str, int] = {}
    of = [layer_of(n) for n in names]
    for layer in of:
        first.setdefault(layer, len(first))
    layers = sorted(first, key=lambda layer: _order(layer, first[layer]))
    index = {layer: i for i, layer in enumerate(layers)}
    return layers, [index[layer] for layer in of]


def membership(names: Sequence[str]) -> Tuple[List[str], np.ndarray]:
    """Layer names and the ``[params, layers]`` 0/1 matrix that sums squared norms per layer."""
    layers, index = group(names)
    matrix = np.zeros((len(names), len(layers)), dtype=np.float32)
    matrix[np.arange(len(names)), index] = 1.0
    return layers, matrix


def block_index(layers: Sequence[str], block: int) -> Optional[int]:
    """The position of decoder block ``block`` in ``layers``, or None."""
    try:
        return list(layers).index(f"layers.{block}")
    except ValueError:
        return None

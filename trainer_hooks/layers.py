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

from trainer_hooks.wire import to_wire_list

_BLOCK = re.compile(r"(?:^|\.)(?:layers|layer|blocks|h)\.(\d+)(?:\.|$)")
_HEAD = ("lm_head", "output_layer", "head")
#: A relative update at or below this is "not moving" (fp32 resolution is ~1e-7 relative).
STILL = 1e-9


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


class LayerReader:
    """Builds each step's ``layers`` event from the train cell's one small per-layer array.

    ``local_norm`` (the 6th of MindFormers' 7 outputs) holds, from
    :class:`~trainer_hooks.cell.DoctorTrainOneStepCell`, the per-layer gradient norms
    (``layer_names``) then the probes (``probe_names``); from a MindFormers cell it holds one norm
    per optimizer parameter, which is grouped per layer here. Every ``every`` steps it also
    samples each layer's relative weight update from a bounded slice of its largest weight (a
    copy at the step before, compared at the step): ``update_ratio``, and from the same slice
    the layer's ``weight_norm`` (its largest weight's norm, estimated: no further copy).
    """

    def __init__(self, train_network: object, optimizer: object, params: Sequence[object],
                 every: int = 50, max_elements: int = 4096) -> None:
        names = [str(getattr(p, "name", "")) for p in params]
        self.names, index = group(names) if names else ([], [])
        self.grad_names = list(getattr(train_network, "layer_names", None) or [])
        self.probe_names = list(getattr(train_network, "probe_names", None) or [])
        opt_names = [str(getattr(p, "name", "")) for p in getattr(optimizer, "parameters", ())]
        self.param_layers = group(opt_names)[1] if opt_names else []
        self.opt_layers = group(opt_names)[0] if opt_names else []
        for extra in self.grad_names + self.probe_names + self.opt_layers:
            if extra not in self.names:
                self.names.append(extra)
        at = {name: i for i, name in enumerate(self.names)}
        self._grad_at = np.array([at[n] for n in (self.grad_names or self.opt_layers)], dtype=np.intp)
        self._probe_at = np.array([at[n] for n in self.probe_names], dtype=np.intp)
        self.every, self.max_elements = max(1, int(every)), max_elements
        largest: Dict[int, object] = {}
        for param, layer in zip(params, index):
            if layer not in largest or int(getattr(param, "size", 0)) > int(getattr(largest[layer], "size", 0)):
                largest[layer] = param
        self.sampled = [(at[self.names[layer]] if layer < len(self.names) else 0, p)
                        for layer, p in sorted(largest.items())]
        self._before: Optional[List[np.ndarray]] = None
        #: layers not moving at the last sampled step (None: not sampled there)
        self.still: Optional[int] = None

    def _slices(self) -> List[np.ndarray]:
        out = []
        for _, param in self.sampled:
            value = np.asarray(param.asnumpy()).reshape(-1)[:self.max_elements]   # type: ignore[attr-defined]
            out.append(value.astype(np.float64))
        return out

    def arrays(self, outputs: object, step: int) -> Dict[str, List[object]]:
        """The per-layer arrays of this step, as wire lists (null where not measured)."""
        found: Dict[str, List[object]] = {}
        local = outputs[5] if isinstance(outputs, (tuple, list)) and len(outputs) == 7 else None
        if local is not None:
            values = np.asarray(local.asnumpy() if hasattr(local, "asnumpy") else local,
                                dtype=np.float64).reshape(-1)
            grads = len(self.grad_names)
            if grads and values.size == grads + len(self.probe_names):
                found["grad_norm"] = self._spread(self._grad_at, values[:grads])
                if self.probe_names:
                    found["act_max"] = self._spread(self._probe_at, values[grads:])
            elif not grads and values.size == len(self.param_layers):   # one norm per parameter
                per_layer = np.bincount(self.param_layers, np.square(values),
                                        minlength=len(self.opt_layers))
                found["grad_norm"] = self._spread(self._grad_at, np.sqrt(per_layer))
        self.still = None
        if self._before is not None:
            before, self._before = self._before, None
            after = self._slices()
            found["update_ratio"] = self._ratios(before, after)
            found["weight_norm"] = self._norms(after)
        if self.sampled and (step + 1) % self.every == 0:
            self._before = self._slices()
        return found

    def _spread(self, at: Sequence[int], values: Sequence[float]) -> List[object]:
        """A wire row: ``values`` at positions ``at``, null (not measured) elsewhere."""
        row: List[object] = [None] * len(self.names)
        for i, value in zip(list(at), to_wire_list(values)):
            row[int(i)] = value
        return row

    def _norms(self, sampled: List[np.ndarray]) -> List[object]:
        """Each sampled layer's weight norm, estimated from its slice: the norm of its largest
        weight as the slice's RMS times sqrt(that weight's size) (exact when it fits)."""
        at, values = [], []
        for (i, param), a in zip(self.sampled, sampled):
            if a.size:
                size = max(int(getattr(param, "size", a.size) or a.size), a.size)
                at.append(i)
                values.append(float(np.sqrt(np.mean(np.square(a)) * size)))
        return self._spread(at, values)

    def _ratios(self, before: List[np.ndarray], after: List[np.ndarray]) -> List[object]:
        """Each sampled layer's relative update; sets ``still``: how many layers did not move
        while the median layer did (a layer left out of the optimizer)."""
        at, values = [], []
        for (i, _), b, a in zip(self.sampled, before, after):
            base = float(np.sqrt(np.square(b).sum()))
            if base > 0:
                at.append(i)
                values.append(float(np.sqrt(np.square(a - b).sum())) / base)
        if values and float(np.median(values)) > STILL:
            self.still = sum(1 for v in values if v <= STILL)
        return self._spread(at, values)

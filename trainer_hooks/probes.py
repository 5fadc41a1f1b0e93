"""Activation probes on decoder blocks: each block's max |output| written in the forward pass.

:func:`attach` turns every block of a model's ``layers`` list into a probed block (its class is
swapped for a subclass, so parameter names and checkpoints stay as they were): after the block
runs, ``doctor_act_max.<i>`` holds the largest |x| of its output, or a non-finite value when the
output holds one. One block can also be *poisoned* (the ``nan-layer`` fault): its output gets
``doctor_poison`` added, 0 except at the injected step. The train cell returns the probes in its
one small per-layer array (:class:`trainer_hooks.cell.DoctorTrainOneStepCell`). MindSpore is
imported with this module.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from mindspore import Parameter, Tensor, ops
from mindspore.common import dtype as mstype

_CLASSES: Dict[Tuple[type, bool], type] = {}


def _probed_class(base: type, poisoned: bool) -> type:
    key = (base, poisoned)
    if key not in _CLASSES:
        class Probed(base):  # type: ignore[valid-type,misc]
            """A decoder block that records its output's max |x| (and may be poisoned)."""

            def construct(self, x, *args, **kwargs):
                out = super().construct(x, *args, **kwargs)
                if self.doctor_poisoned:
                    out = out + ops.cast(self.doctor_poison, ops.dtype(out))
                wide = ops.cast(out, mstype.float32)
                peak = ops.abs(wide).max() + wide.sum() * 0.0   # a NaN or Inf anywhere: NaN
                return ops.depend(out, ops.assign(self.doctor_act_max, peak))

        Probed.__name__ = Probed.__qualname__ = f"Probed{base.__name__}"
        _CLASSES[key] = Probed
    return _CLASSES[key]


def attach(network: Any, poison_blocks: Sequence[int] = ()) -> Tuple[List[Parameter], List[str],
                                                                      Dict[int, Parameter]]:
    """Probe every decoder block of ``network`` (its ``model.layers`` or ``layers``).

    Returns ``(probe parameters, their layer names, block -> its poison parameter)``.
    """
    body = getattr(network, "model", network)
    blocks = getattr(body, "layers", None)
    if blocks is None:
        return [], [], {}
    probes, names, poison = [], [], {}
    for i, block in enumerate(blocks):
        poisoned = i in poison_blocks
        block.__class__ = _probed_class(type(block), poisoned)
        block.doctor_poisoned = poisoned
        block.doctor_act_max = Parameter(Tensor(0.0, mstype.float32), name=f"doctor_act_max.{i}",
                                         requires_grad=False)
        if poisoned:
            poison[i] = block.doctor_poison = Parameter(Tensor(0.0, mstype.float32),
                                                        name=f"doctor_poison.{i}", requires_grad=False)
        probes.append(block.doctor_act_max)
        names.append(f"layers.{i}")
    return probes, names, poison

"""A loss-scale training cell that works on every backend and reports what the doctor needs.

:class:`DoctorTrainOneStepCell` is MindSpore's ``nn.TrainOneStepWithLossScaleCell``
with three changes:

- the overflow check is a portable ``isfinite`` test over the gradients (MindSpore's
  own check needs ``NPUGetFloatStatusV2`` / ``FloatStatus``, which the CPU backend lacks);
  with data parallelism the flag is summed over devices so all ranks skip together;
- the global gradient norm is computed after unscaling (and after the gradient
  reducer), and optionally used for global-norm clipping;
- it returns MindFormers' 5-tuple ``(loss, overflow, loss_scale, lr, global_norm)``,
  which :class:`~trainer_hooks.callback.DoctorCallback` decodes;
- with ``per_layer=True`` it returns MindFormers' local-norm 7-tuple instead: the squared
  norms it sums for the global norm are also summed per layer (``trainer_hooks.layers``), and
  ``local_norm`` is one small array: the per-layer gradient norms, then the values of the
  ``probes`` (e.g. each decoder block's activation max |x|, :mod:`trainer_hooks.probes`).
  ``layer_names`` and ``probe_names`` name its entries.

The optimizer update is skipped on overflow; with a
``nn.DynamicLossScaleUpdateCell`` the scale is then divided by its factor.
MindSpore is imported when this module is imported (it is not part of
``import trainer_hooks``).
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np
from mindspore import Parameter, ParameterTuple, Tensor, nn, ops
from mindspore.common import dtype as mstype

from trainer_hooks.layers import membership

_square_sum = ops.MultitypeFuncGraph("_square_sum")
_not_finite = ops.MultitypeFuncGraph("_not_finite")
_scale_by = ops.MultitypeFuncGraph("_scale_by")


@_square_sum.register("Tensor")
def _square_sum_tensor(grad):
    return ops.square(ops.cast(grad, mstype.float32)).sum()


@_not_finite.register("Tensor")
def _not_finite_tensor(grad):
    return ops.cast(ops.logical_not(ops.isfinite(grad).all()), mstype.float32)


@_scale_by.register("Tensor", "Tensor")
def _scale_by_tensor(factor, grad):
    return grad * ops.cast(factor, ops.dtype(grad))


_boost = ops.MultitypeFuncGraph("_boost")


@_boost.register("Tensor", "Tensor", "Tensor")
def _boost_tensor(gain, chosen, grad):
    return grad * ops.cast(1.0 + (gain * chosen).sum(), ops.dtype(grad))


ScaleSense = Union[None, float, Tensor, nn.Cell]


class DoctorTrainOneStepCell(nn.TrainOneStepWithLossScaleCell):
    """One training step with loss scaling, portable overflow detection and the global norm.

    Args:
        network: a cell returning the loss.
        optimizer: a ``nn.Optimizer``.
        scale_sense: ``None`` or a float (a fixed scale; ``None`` means 1.0), a scalar
            ``Tensor``, or an update cell such as ``nn.DynamicLossScaleUpdateCell``.
        clip_norm: clip gradients to this global norm; ``None`` disables clipping.
        per_layer: also return per-layer gradient norms (and ``probes``) as ``local_norm``.
        probes: scalar Parameters the forward pass writes (appended to ``local_norm``).
        probe_names: their names.
        boost: fault injection: each layer's gradients are scaled by ``1 + boost_gain[layer]``
            (a Parameter, one entry per ``layer_names``; 0 except at the injected step).
    """

    def __init__(self, network: nn.Cell, optimizer: nn.Optimizer, scale_sense: ScaleSense = None,
                 clip_norm: Optional[float] = 1.0, per_layer: bool = False,
                 probes: Sequence[Parameter] = (), probe_names: Sequence[str] = (),
                 boost: bool = False) -> None:
        if scale_sense is None:
            scale_sense = 1.0
        if isinstance(scale_sense, (int, float)) and not isinstance(scale_sense, bool):
            if not scale_sense > 0:
                raise ValueError(f"scale_sense must be a positive number, got {scale_sense!r}")
            scale_sense = Tensor(float(scale_sense), mstype.float32)
        super().__init__(network, optimizer, scale_sense)
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"clip_norm must be a positive number or None, got {clip_norm!r}")
        self.clip = clip_norm is not None
        self.clip_norm = Tensor(float(clip_norm or 1.0), mstype.float32)
        self.dynamic_lr = bool(optimizer.dynamic_lr)
        self.group_lr = bool(optimizer.is_group_lr)
        self.per_layer = bool(per_layer)
        self.layer_names, matrix = membership([p.name for p in self.weights])
        self.layer_matrix = Tensor(matrix, mstype.float32)
        self.probe_names = list(probe_names)
        self.probes = ParameterTuple(list(probes))
        self.has_probes = len(self.probes) > 0
        self.layer_count = Tensor(np.array([len(self.layer_names), len(self.probes)], np.int32))
        self.boost = bool(boost)
        self.boost_chosen = tuple(Tensor(row, mstype.float32) for row in matrix) if self.boost else ()
        zeros = Tensor(np.zeros(len(self.layer_names), np.float32))
        self.boost_gain = Parameter(zeros, name="doctor_boost_gain", requires_grad=False) \
            if self.boost else zeros

    def get_overflow_status(self, status, compute_output):
        """True when any gradient holds NaN/Inf (on any device, with data parallelism)."""
        flags = ops.addn(self.hyper_map(_not_finite, compute_output)).reshape(())
        if self.is_distributed:
            flags = self.allreduce(flags)
        return flags > 0

    def current_lr(self):
        """The learning rate this step uses (first group's when grouped)."""
        if self.dynamic_lr:
            if self.group_lr:
                return self.optimizer.learning_rate[0](self.optimizer.global_step).reshape(())
            return self.optimizer.learning_rate(self.optimizer.global_step).reshape(())
        if self.group_lr:
            return self.optimizer.learning_rate[0]
        return self.optimizer.learning_rate

    def construct(self, *inputs):
        weights = self.weights
        loss = self.network(*inputs)
        scaling_sens = self.scale_sense
        status = Tensor([0] * 8, mstype.int32)
        scaling_sens_filled = ops.ones_like(loss) * ops.cast(scaling_sens, ops.dtype(loss))
        grads = self.grad(self.network, weights)(*inputs, scaling_sens_filled)
        grads = self.hyper_map(ops.partial(_scale_by, ops.reciprocal(scaling_sens)), grads)
        grads = self.grad_reducer(grads)
        if self.boost:
            grads = self.hyper_map(ops.partial(_boost, self.boost_gain), self.boost_chosen, grads)
        cond = self.get_overflow_status(status, grads)
        overflow = self.process_loss_scale(cond)
        if self.per_layer:
            squares = ops.stack(self.hyper_map(_square_sum, grads))
            global_norm = ops.sqrt(squares.sum())
            local_norm = ops.sqrt(ops.matmul(squares.reshape((1, -1)), self.layer_matrix).reshape(-1))
            if self.has_probes:
                local_norm = ops.concat((local_norm, ops.stack(self.probes)))
        else:
            global_norm = ops.sqrt(ops.addn(self.hyper_map(_square_sum, grads)))
        if self.clip:
            factor = self.clip_norm / ops.maximum(global_norm, self.clip_norm)
            grads = self.hyper_map(ops.partial(_scale_by, factor), grads)
        lr = self.current_lr()
        if not overflow:
            loss = ops.depend(loss, self.optimizer(grads))
        if self.per_layer:
            return loss, cond, scaling_sens, lr, global_norm, local_norm, self.layer_count
        return loss, cond, scaling_sens, lr, global_norm


__all__ = ["DoctorTrainOneStepCell"]

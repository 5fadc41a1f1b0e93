"""A loss-scale training cell that works on every backend and reports what the doctor needs.

:class:`DoctorTrainOneStepCell` is MindSpore's ``nn.TrainOneStepWithLossScaleCell``
with three changes:

- the overflow check is a portable ``isfinite`` test over the gradients (MindSpore's
  own check needs ``NPUGetFloatStatusV2`` / ``FloatStatus``, which the CPU backend lacks);
  with data parallelism the flag is summed over devices so all ranks skip together;
- the global gradient norm is computed after unscaling (and after the gradient
  reducer), and optionally used for global-norm clipping;
- it returns MindFormers' 5-tuple ``(loss, overflow, loss_scale, lr, global_norm)``,
  which :class:`~trainer_hooks.callback.DoctorCallback` decodes.

The optimizer update is skipped on overflow; with a
``nn.DynamicLossScaleUpdateCell`` the scale is then divided by its factor.
MindSpore is imported when this module is imported (it is not part of
``import trainer_hooks``).
"""
from __future__ import annotations

from typing import Optional, Union

from mindspore import Tensor, nn, ops
from mindspore.common import dtype as mstype

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


ScaleSense = Union[None, float, Tensor, nn.Cell]


class DoctorTrainOneStepCell(nn.TrainOneStepWithLossScaleCell):
    """One training step with loss scaling, portable overflow detection and the global norm.

    Args:
        network: a cell returning the loss.
        optimizer: a ``nn.Optimizer``.
        scale_sense: ``None`` or a float (a fixed scale; ``None`` means 1.0), a scalar
            ``Tensor``, or an update cell such as ``nn.DynamicLossScaleUpdateCell``.
        clip_norm: clip gradients to this global norm; ``None`` disables clipping.
    """

    def __init__(self, network: nn.Cell, optimizer: nn.Optimizer, scale_sense: ScaleSense = None,
                 clip_norm: Optional[float] = 1.0) -> None:
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
        cond = self.get_overflow_status(status, grads)
        overflow = self.process_loss_scale(cond)
        global_norm = ops.sqrt(ops.addn(self.hyper_map(_square_sum, grads)))
        if self.clip:
            factor = self.clip_norm / ops.maximum(global_norm, self.clip_norm)
            grads = self.hyper_map(ops.partial(_scale_by, factor), grads)
        lr = self.current_lr()
        if not overflow:
            loss = ops.depend(loss, self.optimizer(grads))
        return loss, cond, scaling_sens, lr, global_norm


__all__ = ["DoctorTrainOneStepCell"]

"""Naive micro-step accumulation: the ``accum-mismatch`` fault's train cell.

:class:`MicroStepTrainCell` is :class:`trainer_hooks.cell.DoctorTrainOneStepCell` called once per
micro-batch: it adds the micro-batch's gradients to accumulators and applies the optimizer only on
every ``grad_accum``-th call. The arithmetic is right, but ``Model.train`` now counts cell calls,
so the logged step counts micro-batches: "1000 steps" are ``1000 / grad_accum`` updates
(the StepCountMismatch rule catches it). The correct path is
:func:`trainer_hooks.trainer.model.micro_batch_loss`.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Parameter, Tensor, ops

from trainer_hooks.cell import DoctorTrainOneStepCell

_accumulate = ops.MultitypeFuncGraph("_accumulate")
_reset = ops.MultitypeFuncGraph("_reset")
_scaled = ops.MultitypeFuncGraph("_scaled")
_square_sum = ops.MultitypeFuncGraph("_micro_square_sum")


@_accumulate.register("Tensor", "Tensor")
def _accumulate_tensor(acc, grad):
    return ops.assign_add(acc, ops.cast(grad, ops.dtype(acc)))


@_reset.register("Tensor")
def _reset_tensor(acc):
    return ops.assign(acc, ops.zeros_like(acc))


@_scaled.register("Tensor", "Tensor")
def _scaled_tensor(factor, grad):
    return grad * ops.cast(factor, ops.dtype(grad))


@_square_sum.register("Tensor")
def _square_sum_tensor(grad):
    return ops.square(ops.cast(grad, ms.float32)).sum()


class MicroStepTrainCell(DoctorTrainOneStepCell):
    """Accumulates one micro-batch per call; updates on every ``grad_accum``-th call."""

    def __init__(self, network, optimizer, grad_accum: int, scale_sense=None,
                 clip_norm: float = 1.0) -> None:
        super().__init__(network, optimizer, scale_sense, clip_norm)
        self.grad_accum = int(grad_accum)
        self.inv_accum = Tensor(1.0 / grad_accum, ms.float32)
        self.accum = self.weights.clone(prefix="accum_grad", init="zeros")
        self.calls = Parameter(Tensor(0, ms.int32), name="accum_calls", requires_grad=False)

    def construct(self, *inputs):
        loss = self.network(*inputs)
        scaling_sens = self.scale_sense
        status = Tensor([0] * 8, ms.int32)
        filled = ops.ones_like(loss) * ops.cast(scaling_sens, ops.dtype(loss))
        grads = self.grad(self.network, self.weights)(*inputs, filled)
        grads = self.hyper_map(ops.partial(_scaled, self.inv_accum / scaling_sens), grads)
        loss = ops.depend(loss, self.hyper_map(_accumulate, self.accum, grads))
        calls = self.calls + 1
        loss = ops.depend(loss, ops.assign(self.calls, calls))
        cond = self.get_overflow_status(status, self.accum)
        global_norm = ops.sqrt(ops.addn(self.hyper_map(_square_sum, self.accum)))
        lr = self.current_lr()
        if calls % self.grad_accum == 0:
            overflow = self.process_loss_scale(cond)
            factor = self.clip_norm / ops.maximum(global_norm, self.clip_norm)
            clipped = self.hyper_map(ops.partial(_scaled, factor), self.accum)
            if not overflow:
                loss = ops.depend(loss, self.optimizer(clipped))
            loss = ops.depend(loss, self.hyper_map(_reset, self.accum))
        return loss, cond, scaling_sens, lr, global_norm

"""Warmup then cosine decay, as a MindSpore ``LearningRateSchedule`` driven by the optimizer's step.

The schedule's position is the optimizer's ``global_step`` parameter (the count of applied updates),
which is saved in every checkpoint, so a resumed run continues the same curve. ``scale`` is a
parameter multiplied into the rate: the ``stall`` injection sets it to 0 on the live run.
"""
from __future__ import annotations

import math


def warmup_steps(total_steps: int, fraction: float = 0.02) -> int:
    """Warmup length: ``fraction`` (1-2 %) of the run, at least one step."""
    return max(1, int(round(total_steps * fraction)))


def lr_at(update: int, peak: float, total_steps: int, warmup: int, floor: float = 0.1) -> float:
    """Learning rate of the ``update``-th optimizer update (0-based): the reference for the cell."""
    if update < warmup:
        return peak * (update + 1) / warmup
    progress = min(1.0, (update + 1 - warmup) / max(1, total_steps - warmup))
    low = peak * floor
    return low + 0.5 * (peak - low) * (1.0 + math.cos(math.pi * progress))


def make_schedule(peak: float, total_steps: int, warmup: int, floor: float = 0.1):
    """A ``nn.LearningRateSchedule`` computing :func:`lr_at` inside the graph."""
    import mindspore as ms
    from mindspore import Parameter, Tensor, ops
    from mindspore.nn.learning_rate_schedule import LearningRateSchedule

    class WarmupCosine(LearningRateSchedule):
        """Linear warmup to ``peak`` over ``warmup`` updates, then cosine down to ``floor * peak``."""

        def __init__(self) -> None:
            super().__init__()
            self.peak = Tensor(peak, ms.float32)
            self.low = Tensor(peak * floor, ms.float32)
            self.warmup = Tensor(float(warmup), ms.float32)
            self.span = Tensor(float(max(1, total_steps - warmup)), ms.float32)
            self.pi = Tensor(math.pi, ms.float32)
            self.scale = Parameter(Tensor(1.0, ms.float32), name="lr_scale", requires_grad=False)

        def construct(self, global_step):
            done = ops.cast(global_step, ms.float32).reshape(()) + 1.0
            warm = self.peak * done / self.warmup
            progress = ops.clip_by_value((done - self.warmup) / self.span, 0.0, 1.0)
            cosine = self.low + 0.5 * (self.peak - self.low) * (1.0 + ops.cos(self.pi * progress))
            return ops.select(done <= self.warmup, warm, cosine) * self.scale

    return WarmupCosine()

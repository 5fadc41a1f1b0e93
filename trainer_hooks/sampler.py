"""Host-side readers the callback samples: the relative weight update and the learning rate.

``UpdateSampler`` makes a stalled or exploding update visible without a custom
train cell: at the end of the step before a sampled step it copies a bounded
slice of a few parameters to the host, and at the end of the sampled step it
reports ``update_ratio = |w_s - w_{s-1}| / |w_{s-1}|`` over those slices.
"""
from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from trainer_hooks import env


class UpdateSampler:
    """Samples ``update_ratio`` every ``every`` steps from up to ``count`` parameters.

    Parameters with two or more dimensions (weight matrices, embeddings) are
    preferred, spread evenly over the network; each contributes at most
    ``max_elements`` values (its leading rows), so the copy stays cheap for any
    model size.
    """

    def __init__(self, params: Sequence[Any], every: int, count: int = 4,
                 max_elements: int = 16384, on_host: Optional[bool] = None) -> None:
        if every < 1:
            raise ValueError(f"update_every must be a positive integer, got {every!r}")
        self.every, self.max_elements = every, max_elements
        candidates = [p for p in params if len(p.shape) >= 2] or list(params)
        if len(candidates) > count:
            picks = np.linspace(0, len(candidates) - 1, count).round().astype(int)
            candidates = [candidates[i] for i in sorted(set(picks.tolist()))]
        self.params = candidates
        # unknown backend: slice on the device (the choice that is safe on any backend)
        self.on_host = on_host if on_host is not None else env.device_target() == "CPU"
        self._snapshot: Optional[List[np.ndarray]] = None

    def _rows(self, param: Any) -> int:
        shape = tuple(param.shape)
        if not shape:
            return 0
        per_row = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        return max(1, min(shape[0], self.max_elements // max(per_row, 1)))

    def read(self) -> List[np.ndarray]:
        """Copy the sampled slices to the host (float64, flattened).

        On a device the slice is cut there (one small op) so only it crosses to the host; on
        the CPU backend ``asnumpy()`` is a view of the parameter's memory, so the whole
        parameter is read and cut on the host (a slicing op would cost ~1.5 ms a read).
        """
        slices = []
        for param in self.params:
            rows = self._rows(param)
            whole = rows == 0 or rows >= param.shape[0]
            if whole or self.on_host:
                value = param.asnumpy() if whole else param.asnumpy()[:rows]
            else:
                value = param[:rows].asnumpy()
            slices.append(np.array(value, dtype=np.float64).ravel())
        return slices

    def after_step(self, step: int, delta: int = 1) -> Optional[float]:
        """Call at each step end with the true step number and how far it advanced.

        Returns the update ratio on a sampled step (per step: divided by ``delta``
        when one callback covers several steps), otherwise None.
        """
        ratio = None
        if self._snapshot is not None:
            before, self._snapshot = self._snapshot, None
            after = self.read()
            ratio = relative_change(before, after)
            if ratio is not None and delta > 1:
                ratio /= delta
        if self.params and (step + delta) // self.every > step // self.every:
            self._snapshot = self.read()
        return ratio


def relative_change(before: Sequence[np.ndarray], after: Sequence[np.ndarray]) -> Optional[float]:
    """``|after - before| / |before|`` over all slices; None if shapes differ or |before| is 0.

    Non-finite weights give ``nan`` (a real signal, not an error).
    """
    if len(before) != len(after) or any(a.shape != b.shape for a, b in zip(after, before)):
        return None
    diff = sum(float(np.square(a - b).sum()) for a, b in zip(after, before))
    base = sum(float(np.square(b).sum()) for b in before)
    if base == 0.0:
        return None
    if not (math.isfinite(diff) and math.isfinite(base)):
        return math.nan
    return math.sqrt(diff / base)


def lr_reader(optimizer: Any) -> Optional[Callable[[int], float]]:
    """A cheap ``step -> lr`` reader for ``optimizer`` (first group), or None when not cheap.

    A fixed rate is a Parameter (read each step: a user may change it); a list /
    1-D Tensor of rates is read once and indexed by the 1-based step. A
    ``LearningRateSchedule`` cell would need a graph run per read and is skipped.
    """
    from mindspore import Parameter

    lr = getattr(optimizer, "learning_rate", None)
    if lr is None:
        return None
    if getattr(optimizer, "is_group_lr", False):
        try:
            lr = lr[0]
        except Exception:  # noqa: BLE001
            return None
        lr = getattr(lr, "learning_rate", lr) if type(lr).__name__ == "_ConvertToCell" else lr
    if isinstance(lr, Parameter) and lr.size == 1:
        return lambda step: float(lr.item())
    inner = getattr(lr, "learning_rate", None)
    if type(lr).__name__ == "_IteratorLearningRate" and isinstance(inner, Parameter):
        rates = inner.asnumpy().astype(np.float64).reshape(-1)
        last = len(rates) - 1
        return lambda step: float(rates[min(max(step - 1, 0), last)])
    return None

"""The bounded ring buffer of one signal's recent ``(step, value)`` points (:class:`Series`).

What a series holds costs memory only where it varies: steps that go up by one stride
(every step logged, or every k-th) are not stored, nor are values while every held one is
the same number (bit for bit: a loss scale, the tokens of a step, an overflow flag that
stays 0). Either is stored, for good, from the first point that breaks it.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

DEFAULT_CAPACITY = 4096
MIN_ROOM = 64           # a series' first backing arrays (points)


def keep_last_writes(steps: np.ndarray) -> np.ndarray:
    """Mask of the points that survive purging: a point is dropped when a later one
    has a step <= its step. The kept steps are strictly increasing."""
    if steps.shape[0] < 2:
        return np.ones(steps.shape[0], dtype=bool)
    later_min = np.minimum.accumulate(steps[::-1])[::-1]
    keep = np.ones(steps.shape[0], dtype=bool)
    keep[:-1] = steps[:-1] < later_min[1:]
    return keep


def count_repeats(steps: np.ndarray, last: Optional[int]) -> int:
    """How many of ``steps`` do not exceed every step before them (and ``last``)."""
    floor = np.iinfo(np.int64).min if last is None else last
    prev = np.empty_like(steps)
    prev[0] = floor
    if steps.shape[0] > 1:
        np.maximum(np.maximum.accumulate(steps[:-1]), floor, out=prev[1:])
    return int(np.count_nonzero(steps <= prev))


def same_bits(values: np.ndarray, value: np.ndarray) -> bool:
    """Whether every one of ``values`` (float64) is ``value[0]`` bit for bit (NaN, -0.0)."""
    return bool((values.view(np.uint64) == value.view(np.uint64)[0]).all())


class Series:
    """Bounded ring buffer of ``(step int64, value float64)`` in increasing step order.

    The live window is always one contiguous slice of the backing arrays (reads need no
    copy). The arrays grow with what is kept, by doubling, up to the capacity plus a
    quarter of slack; then survivors move to the front when the slack is used up
    (appends stay amortised O(1) per point). A short run holds a short array.

    Steps that go up by a constant stride are not stored: the step at backing index i is
    ``_s0 + _stride * i`` (``_stride`` 0 while at most one point is held). Values that are
    all the same number are not stored either (``_values`` None, the number in ``_c``).
    The first append that breaks either stores them, for good.
    """

    __slots__ = ("capacity", "_steps", "_values", "_lo", "_hi", "_s0", "_stride", "_size",
                 "_c")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if int(capacity) < 1:
            raise ValueError(f"series capacity must be >= 1, got {capacity!r}")
        self.capacity = int(capacity)
        self._size = min(MIN_ROOM, self._room())        # the backing arrays' length
        self._steps: Optional[np.ndarray] = None
        self._values: Optional[np.ndarray] = None
        self._c = np.zeros(1, dtype=np.float64)         # every held value, while not stored
        self._lo = self._hi = 0
        self._s0 = self._stride = 0

    def _room(self) -> int:
        """The largest backing array: the capacity plus a quarter (at least one point)."""
        return self.capacity + max(self.capacity // 4, 1)

    def __len__(self) -> int:
        return self._hi - self._lo

    @property
    def steps(self) -> np.ndarray:
        """The buffered steps (a view, or with a constant stride a new array; valid until
        the next change)."""
        if self._steps is None:
            return self._s0 + self._stride * np.arange(self._lo, self._hi, dtype=np.int64)
        return self._steps[self._lo:self._hi]

    @property
    def values(self) -> np.ndarray:
        """The buffered values (a view, or when they are all one number a new array; valid
        until the next change)."""
        if self._values is None:
            return np.repeat(self._c, self._hi - self._lo)
        return self._values[self._lo:self._hi]

    def _step_at(self, i: int) -> int:
        if self._steps is None:
            return self._s0 + self._stride * i
        return int(self._steps[i])

    def last(self) -> Optional[Tuple[int, float]]:
        """The newest ``(step, value)``, or None when empty."""
        if self._hi == self._lo:
            return None
        value = self._c[0] if self._values is None else self._values[self._hi - 1]
        return self._step_at(self._hi - 1), float(value)

    def since(self, step: int) -> Tuple[np.ndarray, np.ndarray]:
        """Copies of the points with step >= ``step``."""
        steps = self.steps
        i = int(np.searchsorted(steps, step, side="left"))
        return steps[i:].copy(), self.values[i:].copy()

    def drop_from(self, step: int) -> int:
        """Remove the points with step >= ``step``; return how many were removed."""
        i = self._lo + int(np.searchsorted(self.steps, step, side="left"))
        dropped, self._hi = self._hi - i, i
        return dropped

    def extend(self, steps: np.ndarray, values: np.ndarray) -> int:
        """Append points; a step <= an earlier one purges the earlier points with
        step >= it. Returns the number of incoming points that repeated a step."""
        steps = np.asarray(steps, dtype=np.int64)
        values = np.asarray(values, dtype=np.float64)
        n = steps.shape[0]
        if n == 0:
            return 0
        last = self._step_at(self._hi - 1) if self._hi > self._lo else None
        increasing = n == 1 or bool((steps[1:] > steps[:-1]).all())
        repeated = 0
        if not increasing or (last is not None and steps[0] <= last):
            repeated = count_repeats(steps, None if last is None else int(last))
            keep = keep_last_writes(steps)
            steps, values = steps[keep], values[keep]
            self.drop_from(int(steps[0]))
        self._append(steps, values)
        return repeated

    def _append(self, steps: np.ndarray, values: np.ndarray) -> None:
        """Append strictly increasing steps beyond the last buffered one."""
        n, cap = steps.shape[0], self.capacity
        if n >= cap:
            self._make_room(0, cap)
            self._keep_steps(steps[-cap:], 0)
            self._keep_values(values[-cap:], 0)
            self._hi = cap
            return
        if self._hi + n > self._size:    # grow, or move the survivors to the front
            self._make_room(min(self._hi - self._lo, cap - n), n)
        self._keep_steps(steps, self._hi)
        self._keep_values(values, self._hi)
        self._hi += n
        if self._hi - self._lo > cap:
            self._lo = self._hi - cap

    def _keep_steps(self, steps: np.ndarray, at: int) -> None:
        """Hold ``steps`` (increasing, after the held ones) from backing index ``at`` (the
        end of the held points): implied while they keep one stride, else stored."""
        if self._steps is None:
            held, n = at - self._lo, steps.shape[0]
            if held >= 2:
                stride = self._stride
            elif held == 1:
                stride = int(steps[0]) - self._step_at(at - 1)
            else:
                stride = int(steps[1]) - int(steps[0]) if n > 1 else 0
            s0 = int(steps[0]) - stride * at
            if (held < 2 or s0 == self._s0) and (n < 2 or bool((np.diff(steps) == stride).all())):
                self._s0, self._stride = s0, stride
                return
            self._steps = self._s0 + self._stride * np.arange(self._size, dtype=np.int64)
        self._steps[at:at + steps.shape[0]] = steps

    def _keep_values(self, values: np.ndarray, at: int) -> None:
        """Hold ``values`` from backing index ``at``: implied while every held value is the
        same number, else stored."""
        values = np.asarray(values, dtype=np.float64)
        if self._values is None:
            if at == self._lo:                     # nothing held: the first value is the one
                self._c = values[:1].copy()
            if same_bits(values, self._c):
                return
            self._values = np.empty(self._size, dtype=np.float64)
            self._values[:at] = self._c
        self._values[at:at + values.shape[0]] = values

    def _make_room(self, keep: int, more: int) -> None:
        """The newest ``keep`` points at the front, with room for ``more`` after them (the
        arrays grow by doubling, up to :meth:`_room`)."""
        size = self._size
        if keep + more > size:
            size = min(max(2 * size, keep + more), self._room())
        src = slice(self._hi - keep, self._hi)
        if self._steps is None:
            self._s0 += self._stride * (self._hi - keep)
        else:
            steps = np.empty(size, dtype=np.int64) if size != self._size else self._steps
            steps[:keep] = self._steps[src]
            self._steps = steps
        if self._values is not None:
            values = np.empty(size, dtype=np.float64) if size != self._size else self._values
            values[:keep] = self._values[src]
            self._values = values
        self._size = size
        self._lo, self._hi = 0, keep

    def arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        """Copies of all buffered ``(steps, values)`` (for snapshots)."""
        return self.steps.copy(), self.values.copy()

    @classmethod
    def from_arrays(cls, steps: np.ndarray, values: np.ndarray,
                    capacity: int = DEFAULT_CAPACITY) -> "Series":
        series = cls(capacity)
        series.extend(steps, values)
        return series

    @classmethod
    def restored(cls, steps: Optional[np.ndarray], values: np.ndarray, s0: int, stride: int,
                 capacity: int = DEFAULT_CAPACITY) -> "Series":
        """What :meth:`from_arrays` makes of at most ``capacity`` points whose steps rise
        (unchecked): ``steps`` None when they are ``s0 + stride * i``."""
        series = cls(capacity)
        n, first = values.shape[0], series._size
        if n > first:
            series._size = min(max(2 * first, n), series._room())
        if n:
            series._keep_values(values, 0)
        if steps is None:
            series._s0, series._stride = s0, stride
        else:
            series._steps = np.empty(series._size, dtype=np.int64)
            series._steps[:n] = steps
        series._hi = n
        return series

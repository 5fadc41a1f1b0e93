"""Training batches from the token file: fixed-length windows, seeded shuffle, restorable offset.

The token stream is cut into non-overlapping windows of ``seq_length + 1`` tokens (the model shifts
inputs and labels itself). Windows are visited in a seeded permutation per pass ("epoch") over the
file; sample ``g`` of the run is a pure function of ``(seed, g)``, so the data offset of a resumed
run is just the number of samples already consumed. Ranks read interleaved samples
(``g * world + rank``) of the same permutation, like a distributed sampler.
"""
from __future__ import annotations

import time
from typing import Callable, Optional

import numpy as np

#: (step, sample index within the step's batch) -> window tokens, or None to keep the real sample.
Corruptor = Callable[[int, int], Optional[np.ndarray]]


class WindowSource:
    """Random-access source for ``GeneratorDataset``: item ``i`` is one ``seq_length + 1`` window."""

    def __init__(self, ids: np.ndarray, seq_length: int, samples_per_step: int, start_step: int,
                 steps: int, seed: int, rank: int = 0, world: int = 1,
                 corrupt: Optional[Corruptor] = None,
                 batch_of: Optional[Callable[[int], int]] = None,
                 slow=None) -> None:
        self.ids, self.seq_length = ids, seq_length
        self.window = seq_length + 1
        self.n_windows = (len(ids) - 1) // seq_length
        if self.n_windows < 1:
            raise ValueError(f"token file has {len(ids)} tokens, fewer than one window of {self.window}")
        self.samples_per_step, self.start_step, self.steps = samples_per_step, start_step, steps
        self.seed, self.rank, self.world = seed, rank, world
        self.corrupt = corrupt
        #: step -> the data batch it reads (skipped batches left out); identity by default
        self.batch_of = batch_of or (lambda step: step)
        #: a slow-data window (``injection.SlowWindow``): ``slow.wait(step)`` per batch
        self.slow = slow
        self._cached = (-1, np.empty(0, dtype=np.int64))   # (epoch, permutation), swapped atomically

    def __len__(self) -> int:
        return self.steps * self.samples_per_step

    def permutation(self, epoch: int) -> np.ndarray:
        """The window order of pass ``epoch`` over the file (seeded, the same on every rank)."""
        cached = self._cached      # one read: loader threads may swap it concurrently
        if cached[0] != epoch:
            cached = (epoch, np.random.default_rng([self.seed, epoch]).permutation(self.n_windows))
            self._cached = cached
        return cached[1]

    def sample(self, global_sample: int) -> np.ndarray:
        """Window tokens of the run's ``global_sample``-th sample on this rank."""
        g = global_sample * self.world + self.rank
        epoch, slot = divmod(g, self.n_windows)
        start = int(self.permutation(epoch)[slot]) * self.seq_length
        return np.asarray(self.ids[start:start + self.window], dtype=np.int32)

    def __getitem__(self, index: int):
        local_step, within = divmod(int(index), self.samples_per_step)
        step = self.start_step + local_step + 1           # 1-based optimizer step this sample feeds
        batch = self.batch_of(step)
        if self.slow is not None and within == 0:
            self.slow.wait(step)
        if self.corrupt is not None:
            bad = self.corrupt(batch, within)
            if bad is not None:
                return (np.asarray(bad, dtype=np.int32),)
        return (self.sample((batch - 1) * self.samples_per_step + within),)


class Sleeper:
    """A batch map that sleeps per batch: a slow loader (the ``slow-data`` injection).

    ``delay`` is milliseconds, or an object whose ``wait()`` paces each batch
    (:class:`trainer_hooks.trainer.injection.LoaderPace`).
    """

    def __init__(self, delay) -> None:
        self.delay = delay

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        if hasattr(self.delay, "wait"):
            self.delay.wait()
        else:
            time.sleep(self.delay / 1000.0)
        return batch


def build(source: WindowSource, batch_size: int, workers: int, slow_ms=0.0):
    """The ``mindspore.dataset`` pipeline: parallel reads, static batches, last partial batch dropped.

    ``slow_ms``: a per-batch loader delay (ms, or a ``LoaderPace``); 0 for none.
    """
    import mindspore.dataset as ds

    data = ds.GeneratorDataset(source, column_names=["input_ids"], shuffle=False,
                               num_parallel_workers=workers, python_multiprocessing=False)
    data = data.batch(batch_size, drop_remainder=True)
    if hasattr(slow_ms, "wait") or slow_ms > 0:
        data = data.map(operations=Sleeper(slow_ms), input_columns=["input_ids"],
                        num_parallel_workers=1, python_multiprocessing=False)
    return data

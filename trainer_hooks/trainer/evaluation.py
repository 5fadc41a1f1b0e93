"""``--eval-every N``: an evaluation pass every N steps, as LLM pretraining runs one.

The pass is real work: the model's forward loss over ``batches`` fixed held-out batches (windows
of a pass over the corpus the training does not reach: another shuffle seed), no update. The
callbacks given as ``listeners`` (msdoctor's hooks) get MindSpore's evaluation callbacks around
it, ``on_eval_begin`` and ``on_eval_end``, as ``Model.eval`` and ``Model.fit`` call them; the
pass's mean loss is printed, its length given to ``note`` (the trainer's own account).
"""
from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

import numpy as np

#: Seed offset of the held-out windows' shuffle.
HELD_OUT_SEED = 0x5EED


def held_out(ids: np.ndarray, seq_length: int, samples: int, seed: int, rank: int, world: int,
             batches: int) -> list:
    """``batches`` arrays of ``samples`` windows from a shuffle the training does not use."""
    from trainer_hooks.trainer.dataset import WindowSource

    other = WindowSource(ids, seq_length, samples, 0, batches, seed + HELD_OUT_SEED, rank, world)
    return [np.stack([other[b * samples + i][0] for i in range(samples)]) for b in range(batches)]


def make_callback(network, data: list, every: int, listeners: Sequence = (),
                  note: Optional[Callable] = None):
    """The callback evaluating ``network`` on ``data`` at every ``every``-th step's end."""
    from mindspore import Tensor
    from mindspore.train import Callback, RunContext

    class Evaluator(Callback):
        """Runs the evaluation pass (see the module docstring)."""

        def on_train_step_end(self, run_context) -> None:
            step = int(run_context.original_args().cur_step_num)
            if step % every:
                return
            context = RunContext(run_context.original_args())
            began = time.perf_counter()
            for listener in listeners:
                listener.on_eval_begin(context)
            losses = [float(network(Tensor(batch)).asnumpy()) for batch in data]
            for listener in listeners:
                listener.on_eval_end(context)
            took = time.perf_counter() - began
            if note is not None:
                note("eval", step=step, s=took)
            print(f"eval at step {step}: loss {np.mean(losses):.4f} over {len(data)} held-out "
                  f"batches in {took:.2f}s", flush=True)

    return Evaluator()

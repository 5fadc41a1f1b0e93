"""Complete, step-numbered checkpoints: model, optimizer, LR-schedule position and data offset.

One file per save, ``<run_dir>/checkpoints/rank-<R>/step-<NNNNNNNN>.ckpt`` (never one overwritten
file). It holds every parameter of the train cell: the model's weights, the optimizer's moments
and its ``global_step`` (the LR schedule's position), the loss scale, plus ``step`` (optimizer
updates done) and ``data_offset`` (samples this rank consumed). Only the last ``keep`` files stay.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional

_NAME = re.compile(r"^step-(\d{8})\.ckpt$")


@dataclass(frozen=True)
class Restored:
    """What a checkpoint tells a resumed run beyond the parameters."""

    path: Path
    step: int
    data_offset: int


def folder(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"rank-{rank}"


def path_for(run_dir: Path, rank: int, step: int) -> Path:
    return folder(run_dir, rank) / f"step-{step:08d}.ckpt"


def saved(run_dir: Path, rank: int) -> List[Path]:
    """Finished checkpoint files of ``rank``, oldest first."""
    base = folder(run_dir, rank)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if _NAME.match(p.name))


def save(cell, run_dir: Path, rank: int, step: int, data_offset: int, keep: int,
         protected: Iterable[str] = ()) -> Path:
    """Write the checkpoint of ``step`` (temp file, then rename) and prune to the last ``keep``
    (``protected`` real paths are never pruned)."""
    import mindspore as ms

    target = path_for(run_dir, rank, step)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.tmp.ckpt")
    ms.save_checkpoint(cell, str(tmp), append_dict={"step": int(step), "data_offset": int(data_offset)})
    os.replace(tmp, target)
    kept = set(protected)
    for old in saved(run_dir, rank)[:-keep] if keep > 0 else []:
        if os.path.realpath(old) in kept:
            continue
        try:
            old.unlink()
        except OSError:
            pass
    return target


def restore(cell, run_dir: Path, rank: int, path: Optional[str] = None) -> Optional[Restored]:
    """Load ``path``, else the newest checkpoint of ``rank``, into ``cell``; None when there is
    none."""
    import mindspore as ms

    files = [Path(path)] if path else saved(run_dir, rank)
    if not files:
        return None
    params = ms.load_checkpoint(str(files[-1]))
    step = int(params.pop("step").asnumpy())
    offset = int(params.pop("data_offset").asnumpy())
    for name in [n for n in params if n.startswith("doctor_")]:   # probes and fault switches
        params.pop(name)
    missing, _ = ms.load_param_into_net(cell, params, strict_load=True)
    trainable_missing = [name for name in missing if not name.startswith(("accum", "doctor_"))]
    if trainable_missing:
        raise RuntimeError(f"checkpoint {files[-1]} lacks {len(trainable_missing)} parameters of this "
                           f"model (e.g. {trainable_missing[:3]}): was it written by another preset?")
    return Restored(files[-1], step, offset)


def load_weights(network, path: str, skip_block: Optional[int] = None,
                 skip_all: bool = False) -> int:
    """Load the model weights of checkpoint file ``path`` into ``network`` (not the optimizer's
    state); decoder block ``skip_block``'s keys are left out (the ``skip-load`` fault), or every
    key (``skip_all``: ``load-nothing``). Returns how many keys were skipped; raises when a
    weight of the model is missing otherwise."""
    import mindspore as ms

    from trainer_hooks.layers import layer_of

    params = ms.load_checkpoint(str(path))
    own = {p.name for p in network.get_parameters()}
    weights = {k: v for k, v in params.items() if k in own and not k.startswith("doctor_")}
    skipped = [k for k in weights if skip_all
               or skip_block is not None and layer_of(k) == f"layers.{skip_block}"]
    for name in skipped:
        weights.pop(name)
    missing = [p.name for p in network.trainable_params()
               if p.name not in weights and p.name not in skipped]
    if missing:
        raise RuntimeError(f"checkpoint {path} lacks {len(missing)} weights of this model "
                           f"(e.g. {missing[:3]}): was it written by another preset?")
    ms.load_param_into_net(network, weights)
    return len(skipped)


def make_callback(cell, run_dir: Path, rank: int, every: int, keep: int, samples_per_step: int,
                  last_step: int, protected: Iterable[str] = ()):
    """A callback saving every ``every`` steps and at ``last_step``, exposing ``latest_ckpt_file_name``."""
    from mindspore.train import Callback

    class CheckpointSaver(Callback):
        """Saves complete checkpoints (see module docstring)."""

        def __init__(self) -> None:
            super().__init__()
            self.latest_ckpt_file_name = ""
            self.latest_ckpt_save_s = 0.0        # read by the hooks' checkpoint event
            self.last_step = last_step

        def on_train_step_end(self, run_context) -> None:
            step = int(run_context.original_args().cur_step_num)
            if step % every == 0 or step == self.last_step:
                began = time.perf_counter()
                path = save(cell, run_dir, rank, step, step * samples_per_step, keep, protected)
                self.latest_ckpt_save_s = time.perf_counter() - began
                self.latest_ckpt_file_name = str(path)

    return CheckpointSaver()

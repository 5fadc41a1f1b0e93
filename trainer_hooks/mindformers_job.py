"""What a MindFormers job already says about itself, read from the objects ``Model.train`` hands
every callback, and the CPU stand-in for MindFormers' Ascend-only overflow check.

MindFormers' ``Trainer`` passes a YAML callback only its own keys (``build_callback`` gives
default arguments to ``MFLossMonitor`` alone), so :class:`~trainer_hooks.mindformers.MsDoctorMonitor`
reads the rest when training begins:

- the train cell (``MFTrainOneStepCell``): the loss-scale manager (``DynamicLossScaleUpdateCell``:
  initial scale, factor, ``scale_window`` -> ``loss_scale_window``, which LossScaleStuck reads),
  gradient clipping (``use_clip_grad``, ``ClipGradNorm`` max norm), gradient accumulation
  (``GradAccumulationCell`` and MindFormers' variants: ``micro_size``);
- the model's config (``LlamaConfig`` etc.): ``seq_length``, ``vocab_size`` (the initial loss
  of a fresh model is about ln(vocab)), ``batch_size`` (the micro batch), ``compute_dtype`` and
  its ``parallel_config`` (data/model/pipeline parallel, micro batches);
- MindSpore's auto-parallel context: parallel mode, pipeline stages, device count.

Every read is guarded: a missing attribute leaves the key out, nothing raises.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Optional

import numpy as np

PARALLEL_KEYS = ("data_parallel", "model_parallel", "context_parallel", "pipeline_stage",
                 "micro_batch_num", "use_seq_parallel", "vocab_emb_dp", "expert_parallel")


def cells(cell: Any, depth: int = 6) -> Iterator[Any]:
    """``cell`` and the cells it wraps through ``network`` / ``_backbone`` attributes."""
    seen = set()
    while cell is not None and depth > 0 and id(cell) not in seen:
        seen.add(id(cell))
        yield cell
        cell = getattr(cell, "network", None) or getattr(cell, "_backbone", None)
        depth -= 1


def _number(value: Any) -> Optional[float]:
    """A float from a number, a numpy value or a MindSpore Tensor/Parameter; None if not one."""
    if value is None:
        return None
    try:
        if hasattr(value, "asnumpy"):
            value = value.asnumpy()
        return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
    except (TypeError, ValueError, IndexError):
        return None


def read(cb: Any) -> Dict[str, Any]:
    """run_start.config keys the job's objects tell (see the module docstring)."""
    found: Dict[str, Any] = {}
    chain = list(cells(cb.get("train_network") or cb.get("network")))
    for cell in chain:
        _train_cell(cell, found)
        config = getattr(cell, "config", None)
        if config is not None and "seq_length" not in found:
            _model_config(config, found)
    _parallel(found)
    return found


def _train_cell(cell: Any, found: Dict[str, Any]) -> None:
    manager = getattr(cell, "loss_scaling_manager", None)
    if manager is not None and "loss_scale_window" not in found:
        window = _number(getattr(manager, "scale_window", None))
        if window is not None:
            scale = {"kind": "dynamic", "window": int(window),
                     "factor": _number(getattr(manager, "scale_factor", None)),
                     "init": _number(getattr(cell, "scale_sense", None))}
            found["loss_scaling"] = {k: v for k, v in scale.items() if v is not None}
            found["loss_scale_window"] = int(window)
    if hasattr(cell, "use_clip_grad") and "use_clip_grad" not in found:
        found["use_clip_grad"] = bool(cell.use_clip_grad)
        clip = getattr(cell, "clip_grad_norm", None)
        norm = _number(getattr(clip, "clip_norm", None)) if clip is not None else None
        if cell.use_clip_grad and norm is not None:
            found["clip_norm"] = norm
    micro = getattr(cell, "micro_size", None)
    if isinstance(micro, int) and micro > 1 and "grad_accum" not in found:
        found["grad_accum"] = micro


def _model_config(config: Any, found: Dict[str, Any]) -> None:
    for key in ("seq_length", "vocab_size", "hidden_size", "num_layers"):
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            found[key] = value
    batch = getattr(config, "batch_size", None)
    if isinstance(batch, int) and batch > 0:
        found["micro_batch"] = batch
    dtype = getattr(config, "compute_dtype", None)
    if dtype is not None:
        found["compute_dtype"] = str(dtype)
    parallel = getattr(config, "parallel_config", None)
    if parallel is not None:
        layout = {k: getattr(parallel, k) for k in PARALLEL_KEYS
                  if isinstance(getattr(parallel, k, None), (int, bool))}
        if layout:
            found.setdefault("parallel", {}).update(layout)


def _parallel(found: Dict[str, Any]) -> None:
    try:
        import mindspore as ms

        context = {"mode": ms.get_auto_parallel_context("parallel_mode"),
                   "pipeline_stages": ms.get_auto_parallel_context("pipeline_stages")}
    except Exception:  # noqa: BLE001 - never raise into training
        return
    found.setdefault("parallel", {}).update({k: v for k, v in context.items() if v is not None})


def patch_overflow_check_on_cpu() -> bool:
    """On a CPU, give ``MFTrainOneStepCell`` an overflow check that runs there.

    MindFormers checks for fp16 overflow with ``NPUGetFloatStatusV2`` (Ascend only), so a
    loss-scaled ``MFTrainOneStepCell`` fails to compile on a CPU (``Unsupported op
    [NPUGetFloatStatusV2]``). On a CPU only, the check becomes "any gradient not finite" (the same
    answer). Never on Ascend or GPU. True if the patch is (now) in place.
    """
    import mindspore as ms

    if ms.get_context("device_target") != "CPU":
        return False
    from mindformers.wrapper.wrapper import MFTrainOneStepCell
    from mindspore import ops

    current = MFTrainOneStepCell.get_overflow_status
    if getattr(current, "msdoctor_cpu", False):
        return True
    hyper_map = ops.HyperMap()
    not_finite = ops.MultitypeFuncGraph("msdoctor_not_finite")

    @not_finite.register("Tensor")
    def _not_finite(grad: Any) -> Any:
        return ops.logical_not(ops.isfinite(grad).all()).astype(grad.dtype)

    def get_overflow_status(self: Any, status: Any, compute_output: Any) -> Any:
        return ops.addn(hyper_map(not_finite, compute_output)) > 0

    get_overflow_status.msdoctor_cpu = True  # type: ignore[attr-defined]
    MFTrainOneStepCell.get_overflow_status = get_overflow_status
    return True

"""Reading what a MindSpore training run exposes to callbacks: net outputs, inputs, config.

``net_outputs`` is decoded by shape (the team contract):

- a Tensor: the loss;
- a 3-tuple: ``(loss, overflow, loss_scale)`` (MindSpore's loss-scale cells);
- a 5- or 7-tuple: MindFormers' ``(loss, overflow, loss_scale, lr, global_norm[, local_norm, size])``,
  also what :class:`~trainer_hooks.cell.DoctorTrainOneStepCell` returns;
- any other tuple: the loss is the first element (as MindSpore's ``LossMonitor`` reads it).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

_INT_DTYPES: Optional[frozenset] = None


def scalar(value: Any) -> Optional[float]:
    """A Tensor / Parameter / numpy / Python number as a float (the mean of several), or None."""
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        return float(value)
    if getattr(value, "size", 0) == 1 and hasattr(value, "item"):
        return float(value.item())  # ~0.5 us; asnumpy() costs ~10-30 us (buffer-format parsing)
    array = value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)
    if array.size == 1:
        return float(array.reshape(-1)[0])
    if array.size == 0:
        return None
    return float(array.astype(np.float64).mean())


def flag(value: Any) -> Optional[bool]:
    """A boolean (or 0/1) Tensor / number as a bool: True if any element is set."""
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        return bool(value)
    if getattr(value, "size", 0) == 1 and hasattr(value, "item"):
        return bool(value.item())
    array = value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)
    return bool(array.any())


def decode_outputs(outputs: Any, event: Dict[str, Any]) -> None:
    """Add ``loss`` and, when the layout carries them, ``overflow``, ``loss_scale``, ``lr``,
    ``grad_norm`` to ``event`` (absent or None values are left out)."""
    if isinstance(outputs, (tuple, list)):
        if not outputs:
            return
        count = len(outputs)
        fields = [("loss", outputs[0])]
        if count in (3, 5, 7):
            fields.append(("loss_scale", outputs[2]))
            overflow = flag(outputs[1])
            if overflow is not None:
                event["overflow"] = overflow
        if count in (5, 7):
            fields += [("lr", outputs[3]), ("grad_norm", outputs[4])]
        for name, value in fields:
            number = scalar(value)
            if number is not None:
                event[name] = number
    elif outputs is not None:
        number = scalar(outputs)
        if number is not None:
            event["loss"] = number


def _int_dtypes() -> frozenset:
    global _INT_DTYPES
    if _INT_DTYPES is None:
        from mindspore.common import dtype as mstype

        _INT_DTYPES = frozenset((mstype.int8, mstype.int16, mstype.int32, mstype.int64,
                                 mstype.uint8, mstype.uint16, mstype.uint32, mstype.uint64))
    return _INT_DTYPES


def token_shape(element: Any) -> Optional[tuple]:
    """``(batch, seq)`` of the first input column when it is a 2-D integer (token id) array."""
    if not isinstance(element, (tuple, list)) or not element:
        return None
    first = element[0]
    shape = getattr(first, "shape", None)
    if shape is None or len(shape) != 2:
        return None
    dtype = getattr(first, "dtype", None)
    if isinstance(dtype, np.dtype):
        integer = dtype.kind in "iu"
    else:
        integer = dtype in _int_dtypes()
    return (int(shape[0]), int(shape[1])) if integer else None


def input_tokens(element: Any) -> Optional[int]:
    """Tokens in one cell call's input (``batch * seq`` of 2-D integer ids), or None."""
    shape = token_shape(element)
    return shape[0] * shape[1] if shape else None


def dataset_tokens(dataset: Any) -> Optional[int]:
    """Tokens per batch from a dataset's declared first column (for sink mode, where the
    callback sees no inputs), or None."""
    try:
        shapes, types = dataset.output_shapes(), dataset.output_types()
    except Exception:  # noqa: BLE001 - not a MindSpore dataset, or shapes unknown
        return None
    if not shapes or not types or len(shapes[0]) != 2 or np.dtype(types[0]).kind not in "iu":
        return None
    return int(shapes[0][0]) * int(shapes[0][1])


def _inner_network(network: Any) -> Any:
    for _ in range(4):  # unwrap TrainOneStep / WithLoss style wrappers
        inner = getattr(network, "network", None) or getattr(network, "_backbone", None)
        if inner is None or inner is network:
            break
        network = inner
    return network


def model_params(cell: Any) -> list:
    """The trainable weights of the model inside a train cell (not the optimizer's state)."""
    inner = getattr(cell, "network", None) or getattr(cell, "_backbone", None) or cell
    params = inner.trainable_params() if hasattr(inner, "trainable_params") else []
    return [p for p in params if not str(p.name).startswith(("adam_", "moment", "accum", "doctor_"))]


def config_from_params(cb: Any, *, optimizer: Any, grad_accum: int, world_size: int,
                       micro_batch_inputs: bool = False) -> Dict[str, Any]:
    """The ``run_start.config`` keys that can be read cheaply from the callback parameters."""
    import mindspore as ms

    from trainer_hooks.sampler import lr_reader

    config: Dict[str, Any] = {}
    network = cb.get("network")
    if network is not None:
        config["model"] = type(_inner_network(network)).__name__
    if optimizer is not None:
        config["optimizer"] = type(optimizer).__name__
        config["params"] = int(sum(int(p.size) for p in optimizer.parameters))
        reader = lr_reader(optimizer)
        if reader is not None:
            config["lr"] = reader(1)
    elif network is not None:
        config["params"] = int(sum(int(p.size) for p in network.trainable_params()))
    manager = cb.get("loss_scale_mananger")  # sic: MindSpore's spelling
    if manager is not None:
        config["loss_scale_manager"] = type(manager).__name__
    train_network = cb.get("train_network")
    scale = getattr(train_network, "scale_sense", None)
    if scale is not None and hasattr(scale, "asnumpy"):
        config["loss_scale"] = scalar(scale)
        updater = getattr(train_network, "loss_scaling_manager", None)
        config["loss_scale_update"] = type(updater).__name__ if updater is not None else "fixed"
    grad_accum = max(1, int(grad_accum))
    config["grad_accum"] = grad_accum
    shape = token_shape(cb.get("train_dataset_element"))
    step_batch = None
    if shape:
        batch, config["seq_length"] = shape
        step_batch = batch * grad_accum if micro_batch_inputs else batch
        config["micro_batch"] = batch if micro_batch_inputs else max(1, batch // grad_accum)
    parallel = cb.get("parallel_mode") or "stand_alone"
    config["parallel"] = {"mode": str(parallel), "device_num": int(cb.get("device_number") or world_size)}
    if step_batch and parallel in ("stand_alone", "data_parallel"):
        config["global_batch"] = step_batch * max(1, world_size)
    sink = bool(cb.get("dataset_sink_mode"))
    config["sink_mode"] = sink
    dataset, epochs = cb.get("train_dataset"), cb.get("epoch_num")
    if dataset is not None and epochs:
        sink_size = cb.get("sink_size") or -1
        per_epoch = sink_size if sink and sink_size > 0 else dataset.get_dataset_size()
        config["total_steps"] = int(cb.get("initial_step") or 0) + int(epochs) * int(per_epoch)
    config["mode"] = "graph" if ms.get_context("mode") == ms.GRAPH_MODE else "pynative"
    config["device_target"] = str(ms.get_context("device_target"))
    return config

"""MindFormers' ``LlamaForCausalLM`` built from a preset, with the context MindFormers expects.

On a CPU the model trains in GRAPH mode only with ``fused_rms_norm=False`` (no RmsNorm kernel)
and ``use_rope_slice=True`` (the default RoPE path needs a broadcasting BatchMatMul the CPU lacks).
``mindformers.build_context`` is called first: without it the first MindFormers component that
asks for the context builds a default one in PyNative mode.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Dict

from trainer_hooks.trainer.presets import Preset

#: precision -> (compute dtype, parameter dtype). Parameters stay fp32 (master weights).
DTYPES: Dict[str, tuple] = {
    "fp32": ("float32", "float32"),
    "fp16": ("float16", "float32"),
    "bf16": ("bfloat16", "float32"),
}

def launched_by_msrun() -> bool:
    """True in a worker ``msrun`` started (its dynamic cluster: ``MS_ROLE`` is set)."""
    return bool(os.environ.get("MS_ROLE"))

def quiet_mindformers() -> None:
    """Keep MindFormers' INFO chatter out of the terminal (its log files still get it). Under
    ``msrun`` the console is the worker log (``msrun_log/worker_N.log``), which keeps it, as
    ``run_mindformer.py`` does."""
    if launched_by_msrun():
        return
    names = [n for n in list(logging.root.manager.loggerDict) if n.startswith("mindformers")]
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                handler.setLevel(logging.WARNING)

def setup_context(device: str) -> None:
    """GRAPH mode on ``device`` (CPU, GPU or Ascend), through MindFormers so it stays GRAPH."""
    from mindformers import build_context

    quiet_mindformers()
    build_context({"context": {"mode": "GRAPH_MODE", "device_target": device}, "parallel": {}})
    quiet_mindformers()

def setup_parallel(mode: str, world: int) -> None:
    """Join the launch's ranks for ``data_parallel`` (``msrun``/``mpirun`` on GPU or Ascend:
    the train cell then all-reduces the gradients); say once that CPU ranks are independent.
    Under ``msrun`` the CPU ranks still join its cluster (``init()``), else its scheduler waits
    for them until its timeout."""
    import mindspore as ms

    if mode == "data_parallel":
        from mindspore.communication import init

        init()
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                     gradients_mean=True, device_num=world)
    elif mode == "independent_replicas":
        if launched_by_msrun():
            from mindspore.communication import init

            init()
        print(f"note: {world} ranks on CPU: each trains its own replica on its shard of the data "
              "(no gradient all-reduce on CPU); fine for watching several ranks, not for training",
              file=sys.stderr, flush=True)

def build_llama(preset: Preset, precision: str, device: str):
    """A ``LlamaForCausalLM`` of ``preset``'s size in ``precision`` (fp32 / fp16 / bf16)."""
    from mindformers.models.llama import LlamaConfig, LlamaForCausalLM

    compute, params = DTYPES[precision]
    config = LlamaConfig(
        **preset.llama_fields(),
        compute_dtype=compute, param_init_type=params, layernorm_compute_type="float32",
        softmax_compute_type="float32", rotary_dtype="float32",
        use_flash_attention=False, use_past=False,
        fused_rms_norm=device != "CPU", use_rope_slice=device == "CPU",
        pad_token_id=0, bos_token_id=1, eos_token_id=1)
    return LlamaForCausalLM(config)

def micro_batch_loss(network, micro_batch: int, grad_accum: int):
    """Wrap ``network`` so one call takes ``grad_accum`` micro-batches and returns their mean loss.

    The gradient of the mean of the micro-batch losses is the mean of the micro-batch gradients,
    which is what gradient accumulation computes, so one call of the train cell is one optimizer
    update over ``grad_accum * micro_batch`` samples (the logged step stays the update count).
    """
    if grad_accum == 1:
        return network
    from mindspore import nn

    class MicroBatches(nn.Cell):
        def __init__(self) -> None:
            super().__init__(auto_prefix=False)
            self.network = network

        def construct(self, input_ids):
            total = self.network(input_ids[0:micro_batch])
            for k in range(1, grad_accum):
                total = total + self.network(input_ids[k * micro_batch:(k + 1) * micro_batch])
            return total / grad_accum

    return MicroBatches()

def loss_monitor(steps: int, global_batch: int):
    """MindFormers' own ``MFLossMonitor``, printing every step: the step lines a MindFormers user
    reads in ``output/log/rank_N/info.log`` (and, under ``msrun``, in ``worker_N.log``), which
    ``msdoctor replay`` reads back."""
    from mindformers.core.callback import MFLossMonitor

    return MFLossMonitor(per_print_times=1, origin_epochs=1, dataset_size=steps,
                         global_batch_size=global_batch)

def host_msrun_cluster(device: str) -> int:
    """``msrun`` runs the script in its scheduler process too (``MS_ROLE=MS_SCHED``, with rank 0's
    RANK_ID): there it only hosts the cluster until the workers finish, and trains nothing."""
    import mindspore as ms
    from mindspore.communication import init

    ms.set_device(device)
    init()
    return 0

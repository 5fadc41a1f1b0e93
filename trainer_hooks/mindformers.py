"""``MsDoctorMonitor``: msdoctor's training callback, registered with MindFormers' registry.

With it registered, a MindFormers YAML switches the doctor on like any other callback::

    callbacks:
      - type: MFLossMonitor
      - type: MsDoctorMonitor
        run_dir: ./output/msdoctor        # default: $MSDOCTOR_RUN_DIR, else ./output/msdoctor
        # optional: run, seq_length/tokens_per_step, gradient_accumulation_steps,
        # micro_batch_num, precision, expect_tokens_per_s, expect_step_time_s, update_every

MindFormers 1.9.0 resolves ``type:`` through ``MindFormerRegister`` (module type
``callback``) and has no plugin entry points, so the class must be registered before the
YAML is built: add ``import trainer_hooks.mindformers`` to the launch script (importing
this module registers the class; :func:`register` does it again idempotently). For
``run_mindformer.py`` without editing it, the YAML entry may instead carry
``auto_register: msdoctor_mindformers.MsDoctorMonitor`` with ``REGISTER_PATH`` (or
``--register_path``) pointing at ``trainer_hooks/mindformers_plugin``; see
docs/formats/mindformers.md.

It is :class:`~trainer_hooks.callback.DoctorCallback` (same events, same guarantees: never
raises into training) reading what MindFormers' train cells return,
``(loss, overflow, loss_scale, learning_rate, global_norm[, local_norm, size])``
(``global_norm`` only with ``use_clip_grad``), and fixing the loss the way ``MFLossMonitor``
does (divided by ``gradient_accumulation_steps`` and, with pipeline stages, by
``micro_batch_num``) so the doctor's loss equals the logged one.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional

from trainer_hooks.callback import DoctorCallback

NAME = "MsDoctorMonitor"
DEFAULT_RUN_DIR = os.path.join("output", "msdoctor")


class MsDoctorMonitor(DoctorCallback):
    """DoctorCallback with MindFormers' YAML-friendly arguments (see the module docstring)."""

    def __init__(self, run_dir: Optional[str] = None, *, run: Optional[str] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 config: Optional[Mapping[str, Any]] = None,
                 tokens_per_step: Optional[int] = None, seq_length: Optional[int] = None,
                 micro_batch_size: Optional[int] = None, gradient_accumulation_steps: int = 1,
                 micro_batch_num: int = 1, calculate_per_token_loss: bool = False,
                 precision: Optional[str] = None, expect_tokens_per_s: Optional[float] = None,
                 expect_step_time_s: Optional[float] = None, update_every: int = 50,
                 heartbeat_s: float = 10.0) -> None:
        run_dir = run_dir or os.environ.get("MSDOCTOR_RUN_DIR") or DEFAULT_RUN_DIR
        if tokens_per_step is None and seq_length and micro_batch_size:
            tokens_per_step = int(seq_length) * int(micro_batch_size)
        user = dict(config or {})
        if seq_length:
            user.setdefault("seq_length", int(seq_length))
        super().__init__(run_dir, rank=rank, world_size=world_size, run=run, config=user,
                         tokens_per_step=tokens_per_step, grad_accum=gradient_accumulation_steps,
                         precision=precision, expect_tokens_per_s=expect_tokens_per_s,
                         expect_step_time_s=expect_step_time_s, update_every=update_every,
                         heartbeat_s=heartbeat_s)
        self.micro_batch_num = max(1, int(micro_batch_num))
        self.per_token_loss = bool(calculate_per_token_loss)
        self._loss_divisor = 1.0

    def on_train_begin(self, run_context: Any) -> None:
        super().on_train_begin(run_context)
        try:
            self._loss_divisor = self._divisor()
        except Exception as exc:  # noqa: BLE001 - never raise into training
            self._failed("loss_divisor", exc)

    def _divisor(self) -> float:
        """What MFLossMonitor._fix_loss_for_parallel divides the cell's loss by."""
        import mindspore as ms

        divisor = 1.0
        if not self.per_token_loss:
            if (ms.get_auto_parallel_context("pipeline_stages") or 1) > 1:
                divisor *= self.micro_batch_num
            if self.grad_accum > 1:
                divisor *= self.grad_accum
        return divisor

    def _emit(self, event: Dict[str, Any]) -> None:
        if self._loss_divisor != 1.0 and event.get("type") == "step" and "loss" in event:
            event["loss"] = event["loss"] / self._loss_divisor
        super()._emit(event)


def register(name: str = NAME) -> type:
    """Register :class:`MsDoctorMonitor` as callback ``name`` with MindFormers (idempotent)."""
    from mindformers.tools.register import MindFormerModuleType, MindFormerRegister

    registry = MindFormerRegister.registry.get(MindFormerModuleType.CALLBACK, {})
    if registry.get(name) is not MsDoctorMonitor:
        MindFormerRegister.register_cls(MsDoctorMonitor, MindFormerModuleType.CALLBACK, alias=name)
    return MsDoctorMonitor


register()

__all__ = ["MsDoctorMonitor", "register", "NAME"]

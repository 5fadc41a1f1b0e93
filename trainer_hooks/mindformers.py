"""``MsDoctorMonitor``: msdoctor's training callback, registered with MindFormers' registry.

With it registered, a MindFormers YAML switches the doctor on like any other callback::

    callbacks:
      - type: MFLossMonitor
      - type: MsDoctorMonitor
        run_dir: ./output/msdoctor        # default: $MSDOCTOR_RUN_DIR, else ./output/msdoctor
        expect: {hang_after_s: 120}       # any DoctorCallback option (docs/formats/mindformers.md)

MindFormers 1.9.0 resolves ``type:`` through ``MindFormerRegister`` (module type
``callback``) and has no plugin entry points, so the class must be registered before the
YAML is built: add ``import trainer_hooks.mindformers`` to the launch script (importing
this module registers the class; :func:`register` does it again idempotently). For
``run_mindformer.py`` without editing it, the YAML entry may instead carry
``auto_register: msdoctor_mindformers.MsDoctorMonitor`` with ``REGISTER_PATH`` (or
``--register_path``) pointing at ``trainer_hooks/mindformers_plugin``; see
docs/formats/mindformers.md.

It is :class:`~trainer_hooks.callback.DoctorCallback` (every option of it, same events, same
guarantees: never raises into training) reading what MindFormers' train cells return,
``(loss, overflow, loss_scale, learning_rate, global_norm[, local_norm, size])``
(``global_norm`` only with ``use_clip_grad``), and fixing the loss the way ``MFLossMonitor``
does (divided by ``gradient_accumulation_steps`` and, with pipeline stages, by
``micro_batch_num``) so the doctor's loss equals the logged one. What the job's objects say
(loss-scale window, clipping, accumulation, parallel layout, sequence length, vocabulary
size: :mod:`trainer_hooks.mindformers_job`) goes into ``run_start.config`` unless the YAML
says otherwise. On a CPU it puts in place MindFormers' missing overflow check
(:func:`~trainer_hooks.mindformers_job.patch_overflow_check_on_cpu`). With ``do_eval`` it times
MindFormers' ``EvalCallBack`` passes (the steps' ``eval_s``); with ``protect.json`` it keeps
``CheckpointMonitor``'s rotation off the protected checkpoints (:mod:`trainer_hooks.rotation`).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional

from trainer_hooks import mindformers_job
from trainer_hooks.callback import DoctorCallback

NAME = "MsDoctorMonitor"
DEFAULT_RUN_DIR = os.path.join("output", "msdoctor")


class MsDoctorMonitor(DoctorCallback):
    """DoctorCallback with MindFormers' YAML-friendly arguments (see the module docstring).

    Every :class:`DoctorCallback` keyword is accepted under its own name; MindFormers' names
    ``gradient_accumulation_steps`` (= ``grad_accum``), ``seq_length`` with
    ``micro_batch_size`` (-> ``tokens_per_step``), ``micro_batch_num`` and
    ``calculate_per_token_loss`` (the loss divisor) are accepted too.
    """

    def __init__(self, run_dir: Optional[str] = None, *, run: Optional[str] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 config: Optional[Mapping[str, Any]] = None,
                 tokens_per_step: Optional[int] = None, seq_length: Optional[int] = None,
                 micro_batch_size: Optional[int] = None,
                 gradient_accumulation_steps: Optional[int] = None,
                 grad_accum: Optional[int] = None, micro_batch_inputs: bool = False,
                 micro_batch_num: Optional[int] = None, calculate_per_token_loss: bool = False,
                 precision: Optional[str] = None, expect_tokens_per_s: Optional[float] = None,
                 expect_step_time_s: Optional[float] = None,
                 expect: Optional[Mapping[str, float]] = None, update_every: int = 50,
                 update_params: int = 4, update_max_elements: int = 16384,
                 queue_size: int = 8192, heartbeat_s: float = 10.0, max_errors: int = 100,
                 read_job_config: bool = True, cpu_overflow_check: bool = True) -> None:
        run_dir = run_dir or os.environ.get("MSDOCTOR_RUN_DIR") or DEFAULT_RUN_DIR
        if tokens_per_step is None and seq_length and micro_batch_size:
            tokens_per_step = int(seq_length) * int(micro_batch_size)
        user = dict(config or {})
        if seq_length:
            user.setdefault("seq_length", int(seq_length))
        accum = grad_accum if grad_accum is not None else gradient_accumulation_steps
        super().__init__(run_dir, rank=rank, world_size=world_size, run=run, config=user,
                         tokens_per_step=tokens_per_step, grad_accum=accum or 1,
                         micro_batch_inputs=micro_batch_inputs, precision=precision,
                         expect_tokens_per_s=expect_tokens_per_s,
                         expect_step_time_s=expect_step_time_s, expect=expect,
                         update_every=update_every, update_params=update_params,
                         update_max_elements=update_max_elements, queue_size=queue_size,
                         heartbeat_s=heartbeat_s, max_errors=max_errors)
        self.accum_given = accum is not None
        self.micro_batch_num = micro_batch_num
        self.per_token_loss = bool(calculate_per_token_loss)
        self.read_job_config = bool(read_job_config)
        self.cpu_overflow_check = bool(cpu_overflow_check)
        self.job: Dict[str, Any] = {}
        self._loss_divisor = 1.0
        self._cpu_patch()

    def _cpu_patch(self) -> None:
        if not self.cpu_overflow_check:
            return
        try:
            mindformers_job.patch_overflow_check_on_cpu()
        except Exception as exc:  # noqa: BLE001 - never raise into training
            self._failed("cpu_overflow_check", exc)

    def on_train_begin(self, run_context: Any) -> None:
        self._cpu_patch()
        super().on_train_begin(run_context)
        try:
            if self.read_job_config:
                self._read_job(run_context.original_args())
            self._loss_divisor = self._divisor()
        except Exception as exc:  # noqa: BLE001 - never raise into training
            self._failed("job_config", exc)
        try:
            self._time_evaluations(run_context.original_args())
        except Exception as exc:  # noqa: BLE001
            self._failed("eval_timing", exc)

    def _time_evaluations(self, cb: Any) -> None:
        """Time the evaluations of MindFormers' ``EvalCallBack`` (``do_eval``): its
        ``_execute_eval`` calls ``eval_func`` between two steps; wrapped, its time is the
        next step's ``eval_s``."""
        for callback in cb.get("list_callback") or []:
            func = getattr(callback, "eval_func", None)
            if (callable(func) and hasattr(callback, "_execute_eval")
                    and not getattr(func, "msdoctor_timed", False)):
                callback.eval_func = self._timed(func)

    def _timed(self, func: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.on_eval_begin(None)
            try:
                return func(*args, **kwargs)
            finally:
                self.on_eval_end(None)

        timed.msdoctor_timed = True          # type: ignore[attr-defined]
        return timed

    def _read_job(self, cb: Any) -> None:
        """What the job says, under what the YAML says (the YAML's keys win)."""
        self.job = mindformers_job.read(cb)
        self.user_config = {**self.job, **self.user_config}
        if not self.accum_given and self.job.get("grad_accum", 1) > 1:
            self.grad_accum = int(self.job["grad_accum"])
        if self.micro_batch_num is None:
            self.micro_batch_num = self.job.get("parallel", {}).get("micro_batch_num")

    def _divisor(self) -> float:
        """What MFLossMonitor._fix_loss_for_parallel divides the cell's loss by."""
        import mindspore as ms

        divisor = 1.0
        if not self.per_token_loss:
            if (ms.get_auto_parallel_context("pipeline_stages") or 1) > 1:
                divisor *= max(1, int(self.micro_batch_num or 1))
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

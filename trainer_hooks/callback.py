"""``DoctorCallback``: a MindSpore training callback that streams health signals to the spool.

Use it like any callback: ``model.train(epochs, data, callbacks=[DoctorCallback(run_dir)])``.
It writes ``run_start``, one ``step`` event per optimizer step, ``checkpoint``,
``stop`` and ``run_end`` events to ``<run_dir>/events/rank-<N>.jsonl`` through an
:class:`~trainer_hooks.emitter.Emitter` (a background writer; the hooks never do
file I/O beyond one ``os.stat`` for the stop file per step and one per new checkpoint).

Step semantics (the team contract): ``step`` is MindSpore's ``cur_step_num`` (the
real optimizer step, also across epochs and in sink mode, where one callback
covers ``delta`` steps and per-step figures are divided by ``delta``);
``step_time_s`` runs from the previous step's end to this step's end (the first
step: from its begin); ``data_wait_s`` from the previous step's end to this
step's begin, less checkpoint saves and evaluation passes (``eval_s``: the time between
``on_eval_begin`` and ``on_eval_end`` since the previous step's end); ``tokens`` are this
device's tokens per optimizer step: ``tokens_per_step`` if given, else ``batch * seq`` of the first input column
(2-D integer token ids), multiplied by ``grad_accum`` only when
``micro_batch_inputs=True`` (each cell call sees one micro-batch; MindFormers'
accumulation cells see the whole step's batch, so the default is False).

``expect_tokens_per_s``, ``expect_step_time_s`` and the ``expect`` mapping (other names the
rules read, e.g. ``{"hang_after_s": 60}``: see docs/runbook.md) go to ``run_start.expect``.

A stop request (``<run_dir>/control/stop.json``, checked with one ``os.stat`` per
step) emits a ``stop`` event and calls ``run_context.request_stop()``; ``Model``
honours it after the current step (in device sink mode: after the current epoch).
A stop file older than the run, one that names another run (its ``run`` field), or
something other than a regular file at that path (a FIFO is never opened) is ignored
with a warning.

Nothing here raises into training: every hook body is guarded, an internal
error is counted (``errors``), warned once, and after ``max_errors`` the
callback stops doing work.
"""
from __future__ import annotations

import json
import os
import stat
import time
import traceback
from typing import Any, Dict, Mapping, Optional

from mindspore.train import Callback

from trainer_hooks import capacity, env, preflight, rotation
from trainer_hooks.emitter import Emitter
from trainer_hooks.guard import Guard
from trainer_hooks.layers import LayerReader
from trainer_hooks.outputs import (
    config_from_params,
    dataset_tokens,
    decode_outputs,
    input_tokens,
    model_params,
)
from trainer_hooks.sampler import UpdateSampler, lr_reader
from trainer_hooks.wire import (
    SCHEMA_VERSION,
    STOP_FILE,
    NotRegularFile,
    kind_of,
    make,
    read_regular,
)


class DoctorCallback(Callback):
    """Stream per-step health signals of a MindSpore ``Model.train`` run (see module docstring)."""

    def __init__(self, run_dir: str, *, rank: Optional[int] = None,
                 world_size: Optional[int] = None, run: Optional[str] = None,
                 config: Optional[Mapping[str, Any]] = None,
                 tokens_per_step: Optional[int] = None, grad_accum: int = 1,
                 micro_batch_inputs: bool = False, precision: Optional[str] = None,
                 expect_tokens_per_s: Optional[float] = None,
                 expect_step_time_s: Optional[float] = None,
                 expect: Optional[Mapping[str, float]] = None, update_every: int = 50,
                 update_params: int = 4, update_max_elements: int = 16384,
                 queue_size: int = 8192, heartbeat_s: float = 10.0,
                 max_errors: int = 100, layer_signals: bool = True) -> None:
        super().__init__()
        if not isinstance(run_dir, (str, os.PathLike)):
            raise TypeError(f"DoctorCallback: run_dir must be a directory path (str or "
                            f"os.PathLike), got {run_dir!r}")
        self.run_dir = os.fspath(run_dir)
        self.rank, self.world_size, self.run = rank, world_size, run
        self.user_config = dict(config or {})
        self.tokens_per_step, self.grad_accum = tokens_per_step, max(1, int(grad_accum))
        self.micro_batch_inputs, self.precision = micro_batch_inputs, precision
        self.expect = {k: v for k, v in (("tokens_per_s_per_device", expect_tokens_per_s),
                                         ("step_time_s", expect_step_time_s)) if v is not None}
        self.expect.update({str(k): v for k, v in (expect or {}).items() if v is not None})
        self.update_every, self.update_params = update_every, update_params
        self.update_max_elements = update_max_elements
        self.queue_size, self.heartbeat_s, self.max_errors = queue_size, heartbeat_s, max_errors
        self.layer_signals = layer_signals
        self.guard = Guard("msdoctor DoctorCallback")
        self.emitter: Optional[Emitter] = None
        self._pending_load: Optional[tuple] = None
        self._pending: list = []           # action events waiting for the next run_start
        self.disabled = False
        self.status: Optional[str] = None  # run_end status once emitted
        self._stop_path = os.path.join(self.run_dir, STOP_FILE)
        self._reset()

    def _reset(self) -> None:
        self._run_start_pending = False
        self._first = True
        self._last_step = 0
        self._t_prev_end = self._t_begin = time.perf_counter()
        self._t_train_begin = self._t_end_wall = time.time()
        self._ckpt_pause = 0.0
        self._eval_s = self._eval_wait = 0.0     # evaluation since the last step end; before its begin
        self._eval_t: Optional[float] = None
        self._sampler: Optional[UpdateSampler] = None
        self._layers: Optional[LayerReader] = None
        self._lr = None
        self._memory: Optional[env.Memory] = None
        self._stale_stop: Optional[tuple] = None
        self._ignored_stop: Optional[tuple] = None
        self._stopping = False
        self._ckpt_callbacks: list = []
        self._ckpt_seen: Dict[int, tuple] = {}
        self._cb_params: Any = None
        self._sink_tokens: Optional[int] = None

    @property
    def errors(self) -> int:
        """Internal errors counted so far (each kind warned once)."""
        return self.guard.total()

    def _failed(self, where: str, exc: BaseException) -> None:
        where_in_code = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        line = f" at {where_in_code[0].filename}:{where_in_code[0].lineno}" if where_in_code else ""
        self.guard.report(where, f"{where} failed: {type(exc).__name__}: {exc}{line}; "
                                 "the doctor skips it")
        if self.errors >= self.max_errors:
            self.disabled = True
            self.guard.report("disabled", f"{self.errors} internal errors: the doctor's "
                                          "callback stops here")

    def _emit(self, event: Dict[str, Any]) -> None:
        if self.emitter is not None:
            self.emitter.emit(event)

    def note_load(self, step: int, path: str, seconds: float) -> None:
        """A checkpoint the trainer loaded before this ``Model.train``: recorded after the
        run_start as a ``checkpoint`` event with ``op: load`` and ``load_s``."""
        self._pending_load = (int(step), str(path), float(seconds))

    def record_action(self, action: str, reason: str, alert: Optional[str] = None,
                      step: Optional[int] = None) -> None:
        """Record an action the trainer applied (a rule's ``skip_batches``, ``lower_lr``,
        ``rollback``...) as an ``action`` event (between two ``Model.train`` calls: after the
        next run_start); never raises."""
        try:
            if self.disabled:
                return
            event = make("action", self.rank, t=time.time(), run=self.run,
                         step=step if step is not None else (self._last_step or None),
                         action=str(action), reason=str(reason)[:2000], alert=alert)
            if self.emitter is None or self.emitter.closed or self._run_start_pending:
                self._pending.append(event)
            else:
                self._emit(event)
        except Exception as exc:  # noqa: BLE001
            self._failed("record_action", exc)

    # -- hooks ----------------------------------------------------------------------------

    def on_train_begin(self, run_context: Any) -> None:
        """Set up (once per ``Model.train``): rank, emitter, samplers; run_start follows at step 1."""
        if self.disabled:
            return
        try:
            self._begin(run_context.original_args())
        except Exception as exc:  # noqa: BLE001 - never raise into training
            self._failed("train_begin", exc)

    def on_eval_begin(self, run_context: Any) -> None:
        """An evaluation pass begins (``Model.eval`` and ``Model.fit`` call this; MindFormers'
        ``EvalCallBack`` through :mod:`trainer_hooks.mindformers`)."""
        self._eval_t = time.perf_counter()

    def on_eval_end(self, run_context: Any) -> None:
        """Its time goes into the next step event's ``eval_s``, not into its data wait."""
        if self._eval_t is not None:
            self._eval_s += time.perf_counter() - self._eval_t
            self._eval_t = None

    def on_train_step_begin(self, run_context: Any) -> None:
        """Mark the step's begin (the data wait ends here); run_start before step 1; checkpoints."""
        self._t_begin = time.perf_counter()
        self._eval_wait = self._eval_s
        if self.disabled:
            return
        try:
            if self._run_start_pending:
                self._run_start(run_context.original_args())
            if self._ckpt_callbacks:  # a save at the last step's end is seen here, with its step
                self._check_checkpoints()
        except Exception as exc:  # noqa: BLE001
            self._failed("step_begin", exc)

    def on_train_step_end(self, run_context: Any) -> None:
        """Emit the step event; check the stop request."""
        now = time.perf_counter()
        if self.disabled:
            return
        try:
            self._step_end(run_context, now)
        except Exception as exc:  # noqa: BLE001
            self._failed("step_end", exc)

    def on_train_end(self, run_context: Any) -> None:
        """Emit run_end (completed, or stopped when a stop was requested) and flush."""
        if self.disabled and self.emitter is None:
            return
        try:
            cb = run_context.original_args()
            if self._run_start_pending:
                self._run_start(cb)
            self._check_checkpoints()
            stopped = self._stopping or bool(run_context.get_stop_requested())
            self._end("stopped" if stopped else "completed")
        except Exception as exc:  # noqa: BLE001
            self._failed("train_end", exc)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """``Model.train`` is unwinding: record a failure if it did not end normally."""
        try:
            if exc_type is not None and self.status is None and self.emitter is not None:
                if self._run_start_pending and self._cb_params is not None:
                    self._run_start(self._cb_params)
                text = "".join(traceback.format_exception_only(exc_type, exc)).strip()
                self._end("failed", exception=text[:4000])
        except Exception as err:  # noqa: BLE001
            self._failed("exit", err)
        return None

    # -- work -----------------------------------------------------------------------------

    def _begin(self, cb: Any) -> None:
        self._reset()
        self._cb_params = cb
        self.status = None
        if self.rank is None or self.world_size is None:
            rank, world = env.rank_and_world()
            self.rank = rank if self.rank is None else self.rank
            self.world_size = world if self.world_size is None else self.world_size
        if self.emitter is None or self.emitter.closed:
            self.emitter = Emitter(self.run_dir, self.rank, self.queue_size,
                                   heartbeat_s=self.heartbeat_s, run=self.run)
        self._last_step = int(cb.get("cur_step_num", 0) or 0)
        self._memory = env.Memory()
        self._memory.enable_device()
        optimizer = _optimizer(cb)
        if optimizer is not None:
            self._lr = lr_reader(optimizer)
            if self.update_every:
                self._sampler = UpdateSampler(list(optimizer.parameters), self.update_every,
                                              self.update_params, self.update_max_elements)
            cell = cb.get("train_network") or cb.get("network")
            if self.layer_signals and cell is not None:
                self._layers = LayerReader(cell, optimizer, model_params(cell),
                                           self.update_every or 50)
        self._ckpt_callbacks = [c for c in cb.get("list_callback") or []
                                if hasattr(c, "latest_ckpt_file_name")]
        for c in self._ckpt_callbacks:        # a save of an earlier Model.train is not new
            self._ckpt_seen[id(c)] = _save_mark(c)
            rotation.hold(c, self.run_dir, self.guard)     # protect.json holds against rotation
        try:
            info = os.stat(self._stop_path)
            self._stale_stop = (info.st_mtime_ns, info.st_ino)
            self.guard.report("stale-stop", f"ignoring {self._stop_path} left from before this "
                                            "run started (remove it, or write a new one to stop)")
        except OSError:
            self._stale_stop = None
        self._t_train_begin = time.time()
        self._t_prev_end = self._t_begin = time.perf_counter()
        self._run_start_pending = True

    def _run_start(self, cb: Any) -> None:
        self._run_start_pending = False
        config = config_from_params(cb, optimizer=_optimizer(cb), grad_accum=self.grad_accum,
                                    world_size=self.world_size or 1,
                                    micro_batch_inputs=self.micro_batch_inputs)
        config["versions"] = env.versions()
        cell = cb.get("train_network") or cb.get("network")
        if cell is not None:
            config.update(preflight.facts(model_params(cell)))
        if self.precision:
            config["precision"] = self.precision
        for key, read in (("mem_host_total_bytes", capacity.host_memory_limit),
                          ("mem_device_capacity_bytes", capacity.device_memory_capacity)):
            value = read()
            if value:
                config[key] = value
        config.update(self.user_config)
        started = env.process_start_time()
        event = make("run_start", self.rank, t=self._t_train_begin, run=self.run,
                     world_size=self.world_size, config=config, expect=self.expect or None,
                     process_t=started if started and started <= self._t_train_begin else None)
        self._emit(event)
        if self._pending_load is not None:
            step, path, seconds = self._pending_load
            self._pending_load = None
            self._emit(make("checkpoint", self.rank, t=time.time(), run=self.run, step=step,
                            path=path, op="load", load_s=seconds))
        for pending in self._pending[:64]:
            pending["rank"] = self.rank
            self._emit(pending)
        self._pending = []

    def _step_end(self, run_context: Any, now: float) -> None:
        cb = run_context.original_args()
        step = int(cb.cur_step_num)
        delta = step - self._last_step
        if delta <= 0:  # the same step reported twice (should not happen): keep one event
            return
        self._last_step = step
        event: Dict[str, Any] = {"v": SCHEMA_VERSION, "type": "step", "rank": self.rank,
                                 "step": step, "t": time.time()}
        if self.run is not None:
            event["run"] = self.run
        if self._first:
            event["step_time_s"] = (now - self._t_begin) / delta
            self._first = False
        else:
            event["step_time_s"] = (now - self._t_prev_end) / delta
            wait = self._t_begin - self._t_prev_end - self._ckpt_pause - self._eval_wait
            event["data_wait_s"] = max(0.0, wait) / delta
        if self._eval_s:
            event["eval_s"] = self._eval_s / delta
        outputs = cb.get("net_outputs")
        decode_outputs(outputs, event)
        if self._layers is not None:   # before its step event: the sidecar reads them together
            arrays = self._layers.arrays(outputs, step)
            if arrays:
                self._emit({"v": SCHEMA_VERSION, "type": "layers", "rank": self.rank, "step": step,
                            "t": event["t"], **({"run": self.run} if self.run is not None else {}),
                            "names": self._layers.names, **arrays})
            if self._layers.still is not None:
                event["layers_still"] = self._layers.still
        if "lr" not in event and self._lr is not None:
            event["lr"] = self._lr(step)
        tokens = self.tokens_per_step or input_tokens(cb.get("train_dataset_element"))
        if not tokens and cb.get("dataset_sink_mode"):  # device sink: inputs are not visible
            if self._sink_tokens is None:
                self._sink_tokens = dataset_tokens(cb.get("train_dataset")) or 0
            tokens = self._sink_tokens
        if tokens:
            if self.micro_batch_inputs and not self.tokens_per_step:
                tokens *= self.grad_accum
            event["tokens"] = tokens
        if self.grad_accum > 1:
            event["micro_steps"] = self.grad_accum
        memory = self._memory
        if memory is not None:
            rss = memory.host_rss_bytes()
            if rss is not None:
                event["mem_host_rss_bytes"] = rss
            event.update(memory.device())
        if self._sampler is not None:
            ratio = self._sampler.after_step(step, delta)
            if ratio is not None:
                event["update_ratio"] = ratio
        self._emit(event)
        self._check_stop(run_context, step)
        self._t_prev_end = now  # the hook's own cost counts as wait before the next step
        self._ckpt_pause = self._eval_s = self._eval_wait = 0.0
        self._t_end_wall = time.time()

    def _check_checkpoints(self) -> None:
        for callback in self._ckpt_callbacks:
            path = getattr(callback, "latest_ckpt_file_name", "") or ""
            if path and self._ckpt_seen.get(id(callback)) != _save_mark(callback):
                self._ckpt_seen[id(callback)] = _save_mark(callback)
                size, save_s = checkpoint_facts(callback, str(path), self._t_end_wall)
                self._emit(make("checkpoint", self.rank, t=time.time(), run=self.run,
                                step=self._last_step, path=str(path), size_bytes=size,
                                save_s=save_s))
                if save_s is not None:       # the save is not data wait
                    self._ckpt_pause += save_s

    def _check_stop(self, run_context: Any, step: int) -> None:
        if self._stopping:
            return
        try:
            info = os.stat(self._stop_path)
        except OSError:
            return
        seen = (info.st_mtime_ns, info.st_ino)
        if seen in (self._stale_stop, self._ignored_stop):
            return
        request = _read_stop(self._stop_path) if stat.S_ISREG(info.st_mode) else None
        if request is None:       # a FIFO, a device, a directory: never opened, never waited on
            self._ignored_stop = seen
            self.guard.report("stop-not-a-file", f"ignoring {self._stop_path}: it is "
                                                 f"{kind_of(info.st_mode)}, expected a regular "
                                                 "file written by msdoctor serve")
            return
        target, mine = request.get("run"), self.run or _dir_name(self.run_dir)
        if isinstance(target, str) and target != mine:
            self._ignored_stop = seen
            self.guard.report("stop-other-run", f"ignoring {self._stop_path}: it asks run "
                                                f"{target!r} to stop; this is run {mine!r}")
            return
        self._stopping = True
        reason = str(request.get("reason") or "stop requested by msdoctor")
        self._emit(make("stop", self.rank, t=time.time(), run=self.run, step=step, reason=reason,
                        alert=request.get("alert") if isinstance(request.get("alert"), str) else None))
        self.guard.report("stop", f"stopping training at step {step}: {reason}")
        run_context.request_stop()

    def _end(self, status: str, exception: Optional[str] = None) -> None:
        self.status = status
        self._emit(make("run_end", self.rank, t=time.time(), run=self.run, status=status,
                        step=self._last_step or None, exception=exception))
        if self._memory is not None:
            self._memory.close()
        if self.emitter is not None:
            self.emitter.close(timeout=2.0)


def checkpoint_facts(callback: Any, path: str, since: float) -> tuple:
    """``(size_bytes, save_s)`` of the checkpoint ``callback`` just wrote (None where unknown):
    the save time the saver recorded (the bundled trainer's ``latest_ckpt_save_s``,
    MindFormers' ``save_info_list``), else the file's mtime after ``since`` (the wall time
    of this hook's last step end: savers run after it). One ``os.stat`` per new checkpoint."""
    try:
        info = os.stat(path)
    except OSError:
        return None, None
    size = info.st_size if stat.S_ISREG(info.st_mode) else None
    seconds = getattr(callback, "latest_ckpt_save_s", None)
    if not isinstance(seconds, (int, float)):
        seconds = None
        infos = getattr(callback, "save_info_list", None)
        try:
            started = [v["ckpt"]["save_start_time"] for v in dict(infos or {}).values()
                       if isinstance(v, dict) and v.get("ckpt", {}).get("save_start_time")]
        except (AttributeError, KeyError, TypeError):
            started = []
        if started:
            seconds = info.st_mtime - max(started)
        elif info.st_mtime >= since:
            seconds = info.st_mtime - since
    if seconds is not None and not 0.0 <= seconds < 86400.0:
        seconds = None
    return size, (None if seconds is None else float(seconds))


def _save_mark(saver: Any) -> tuple:
    """What tells a new save: its file, and the saver's own save time where it keeps one (a
    run that went back to an earlier checkpoint saves the same file again)."""
    return (getattr(saver, "latest_ckpt_file_name", "") or "",
            getattr(saver, "latest_ckpt_save_s", None))


def _optimizer(cb: Any) -> Any:
    """The optimizer of this run: Model's, or the train cell's ``optimizer`` attribute."""
    optimizer = cb.get("optimizer")
    if optimizer is None:
        optimizer = getattr(cb.get("train_network"), "optimizer", None)
    if optimizer is None:
        optimizer = getattr(cb.get("network"), "optimizer", None)
    return optimizer if hasattr(optimizer, "parameters") else None


def _read_stop(path: str) -> Optional[Dict[str, Any]]:
    """The stop request's JSON object (data only); a readable reason if it is malformed;
    None when ``path`` is not a regular file (opened with O_NONBLOCK: never waits)."""
    try:
        data = json.loads(read_regular(path, 65536))
        if isinstance(data, dict):
            return data
        return {"reason": f"stop requested ({path} holds {type(data).__name__}, expected an object)"}
    except NotRegularFile:
        return None
    except (OSError, ValueError) as exc:
        return {"reason": f"stop requested ({path} unreadable: {exc})"}


def _dir_name(path: str) -> str:
    """The run id the sidecar gives a run without one: its directory's name."""
    return os.path.basename(os.path.realpath(path))


__all__ = ["DoctorCallback", "STOP_FILE"]

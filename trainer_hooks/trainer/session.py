"""One training session inside MindSpore: model, optimizer, train cell, data, callbacks, ``Model.train``."""
from __future__ import annotations

import math
import sys
import time
from typing import Any, Dict, List, Optional

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.train import Callback, Model

from trainer_hooks import probes
from trainer_hooks.cell import DoctorTrainOneStepCell
from trainer_hooks.layers import layer_of
from trainer_hooks.trainer import checkpoint, control, dataset, injection, model, schedule
from trainer_hooks.trainer.plan import (
    ADAM_BETAS,
    CLIP_NORM,
    WEIGHT_DECAY,
    Plan,
    loss_scale_of,
    parallel_mode,
)


class StepOrigin(Callback):
    """Makes ``cur_step_num`` continue from the checkpoint's step on a resumed run.

    ``Model.train`` starts counting at 0; placed first in the callback list, this sets the
    counter before any other callback (the hooks included) reads it.
    """

    def __init__(self, start_step: int) -> None:
        super().__init__()
        self.start_step = start_step

    def on_train_begin(self, run_context) -> None:
        run_context.original_args().cur_step_num = self.start_step


class ConsoleLog(Callback):
    """A progress line every ``every`` steps (step, loss, lr, grad norm, loss scale, steps/s
    since the previous line, or since training began), and a closing summary line."""

    def __init__(self, every: int, total: int, out=sys.stdout, run_dir: str = "") -> None:
        super().__init__()
        self.every, self.total, self.out, self.run_dir = every, total, out, run_dir
        self._t, self._step = time.perf_counter(), 0
        self._began: float = self._t
        self._first_step = self._last_step = 0
        self._loss_first = self._loss_last = self._loss_min = math.nan
        self._min_step = 0
        self._nonfinite, self._nonfinite_first = 0, 0

    def on_train_begin(self, run_context) -> None:
        self._began = self._t = time.perf_counter()
        self._step = int(run_context.original_args().cur_step_num)

    def on_train_step_end(self, run_context) -> None:
        cb = run_context.original_args()
        step = int(cb.cur_step_num)
        loss = float(np.asarray(cb.net_outputs[0].asnumpy()).reshape(-1)[0])
        self._fold(step, loss)
        if step % self.every and step != self.total:
            return
        _loss, _overflow, scale, lr, gnorm = (np.asarray(x.asnumpy()).reshape(-1)[0]
                                              for x in cb.net_outputs[:5])
        now = time.perf_counter()
        rate = (step - self._step) / max(now - self._t, 1e-9)
        self._t, self._step = now, step
        self.out.write(f"step {step:>6}/{self.total}  loss {loss:8.4f}  lr {float(lr):.2e}  "
                       f"grad_norm {float(gnorm):8.4f}  loss_scale {float(scale):g}  "
                       f"{rate:6.1f} steps/s\n")
        self.out.flush()

    def _fold(self, step: int, loss: float) -> None:
        if not self._first_step:
            self._first_step = step
        self._last_step = step
        if not math.isfinite(loss):
            self._nonfinite += 1
            self._nonfinite_first = self._nonfinite_first or step
            return
        if math.isnan(self._loss_first):
            self._loss_first = loss
        self._loss_last = loss
        if math.isnan(self._loss_min) or loss < self._loss_min:
            self._loss_min, self._min_step = loss, step

    def on_train_end(self, run_context) -> None:
        took = time.perf_counter() - self._began
        steps = self._last_step - self._first_step + 1 if self._first_step else 0
        line = (f"done: steps {self._first_step}..{self._last_step} in {took:.1f}s "
                f"({steps / max(took, 1e-9):.1f} steps/s); loss first {self._loss_first:.4f}, "
                f"last {self._loss_last:.4f}, min {self._loss_min:.4f} at step {self._min_step}")
        if self._nonfinite:
            line += (f"; {self._nonfinite} non-finite loss step(s), the first at step "
                     f"{self._nonfinite_first}")
        if self.run_dir:
            line += f"; events in {self.run_dir}/events"
        self.out.write(line + "\n")
        self.out.flush()


def param_groups(network, frozen: Optional[int] = None) -> List[Dict[str, Any]]:
    """Weight decay on matrices only (not on norms and biases), as LLM pretraining does;
    decoder block ``frozen`` left out (the ``frozen-layer`` fault)."""
    params = [p for p in network.trainable_params()
              if frozen is None or layer_of(p.name) != f"layers.{frozen}"]
    decay = [p for p in params if len(p.shape) >= 2]
    no_decay = [p for p in params if len(p.shape) < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


class Session:
    """Builds and runs the training of one :class:`Plan`."""

    def __init__(self, plan: Plan, args, config: Dict[str, Any], token_file) -> None:
        self.plan, self.args, self.config, self.token_file = plan, args, config, token_file

    def build_cell(self):
        plan, inj = self.plan, self.args.injections
        model.setup_context(self.args.device)
        model.setup_parallel(parallel_mode(plan, self.args.device), plan.world)
        ms.set_seed(self.args.seed + plan.rank)
        np.random.seed(self.args.seed + plan.rank)
        self.network = model.build_llama(plan.model_preset, plan.precision, self.args.device)
        self.schedule = schedule.make_schedule(plan.lr, plan.steps, plan.warmup)
        self.switches: Dict[str, Any] = {}
        probed, probe_names, poison = probes.attach(
            self.network, [inj.nan_layer[1]] if inj.nan_layer else [])
        if poison:
            self.switches["poison"] = poison
        optimizer = nn.AdamWeightDecay(param_groups(self.network, inj.frozen_layer),
                                       learning_rate=self.schedule,
                                       beta1=ADAM_BETAS[0], beta2=ADAM_BETAS[1], eps=1e-8)
        scale = loss_scale_of(plan, self.args)
        sense = None
        if scale:
            sense = nn.DynamicLossScaleUpdateCell(scale[0], 2, scale[1]) if scale[2] else scale[0]
        if inj.accum_mismatch:
            from trainer_hooks.trainer.cell import MicroStepTrainCell

            cell = MicroStepTrainCell(self.network, optimizer, plan.grad_accum, sense, CLIP_NORM)
        else:
            loss_net = model.micro_batch_loss(self.network, plan.micro_batch, plan.grad_accum)
            boost = inj.grad_layer is not None or bool(getattr(self.args, "boost_all", False))
            cell = DoctorTrainOneStepCell(loss_net, optimizer, sense, CLIP_NORM, per_layer=True,
                                          probes=probed, probe_names=probe_names, boost=boost)
            if boost:
                self.switches["boost"] = (cell.boost_gain, cell.layer_names)
        cell.set_train()
        return cell

    def run(self) -> int:
        plan, args = self.plan, self.args
        cell = self.build_cell()
        calls_total = plan.steps * plan.cell_calls_per_step
        self.data_map = control.DataMap()
        self.doctor = None
        self.control = control.Control(str(plan.run_dir), self.config["run"], self.data_map,
                                       self._record)
        start, loaded = 0, None
        if args.resume:
            began = time.perf_counter()
            restored = checkpoint.restore(cell, plan.run_dir, plan.rank)
            if restored is not None:
                start = restored.step
                loaded = (restored.step, str(restored.path), time.perf_counter() - began)
                print(f"resumed from {restored.path} at step {start} "
                      f"(data offset {restored.data_offset} samples)", flush=True)
            else:
                print(f"--resume: no checkpoint in {plan.run_dir}, starting at step 0", flush=True)
        if start >= calls_total:
            print(f"nothing to do: the run is at step {start} of {calls_total}", flush=True)
            return 0
        if args.init_from:
            skip, nothing = args.injections.skip_load, args.injections.load_nothing
            skipped = checkpoint.load_weights(self.network, args.init_from, skip, nothing)
            print(f"initialised from {args.init_from}" +
                  (f" ({skipped} keys {'in all' if nothing else f'of block {skip}'} skipped)"
                   if skipped else ""), flush=True)
        if args.injections.init_scale:
            injection.scale_weights(self.network, float(args.injections.init_scale))
        self.control.poll(start)             # batches skipped before a restart stay skipped
        end = min(calls_total, start + args.stop_after) if args.stop_after else calls_total
        callbacks = self._callbacks(cell, start, end, calls_total)
        steering = control.make_callback(self.control, self.schedule)
        callbacks.insert(1, steering)
        while True:
            if loaded is not None and self.doctor is not None:
                self.doctor.note_load(*loaded)
            callbacks[0] = StepOrigin(start)
            print(f"training {plan.preset.name} ({self.config['params']:,} params, {plan.precision}, "
                  f"seq {plan.preset.seq_length}, batch {plan.micro_batch}x{plan.grad_accum}) "
                  f"steps {start + 1}..{end} of {calls_total} -> {plan.run_dir}", flush=True)
            Model(cell).train(1, self._data(start, end), callbacks=callbacks,
                              dataset_sink_mode=False)
            rollback = self.control.rollback
            if rollback is None or steering.stopped_at is None:
                return 0
            began = time.perf_counter()
            restored = checkpoint.restore(cell, plan.run_dir, plan.rank, path=rollback.checkpoint)
            assert restored is not None
            loaded = (restored.step, str(restored.path), time.perf_counter() - began)
            self.control.done_rollback(steering.stopped_at)
            start, steering.stopped_at = restored.step, None
            callbacks = [c for c in callbacks if c is not self.monitor]

    def _record(self, action: str, reason: str, alert, step) -> None:
        print(f"msdoctor action {action} at step {step}: {reason}", flush=True)
        if self.doctor is not None:
            self.doctor.record_action(action, reason, alert, step)

    def _data(self, start: int, end: int):
        plan, args, inj = self.plan, self.args, self.args.injections
        samples = plan.samples_per_call
        corrupt = None
        if inj.spike or inj.periodic or inj.bad_data:
            counts = np.bincount(self.token_file.ids, minlength=plan.preset.vocab_size)
            corrupt = injection.CorruptShard(inj, plan.preset.vocab_size,
                                             plan.preset.seq_length + 1, args.seed, counts)
        source = dataset.WindowSource(self.token_file.ids, plan.preset.seq_length, samples, start,
                                      end - start, args.seed, plan.rank, plan.world, corrupt,
                                      batch_of=self.data_map.batch)
        return dataset.build(source, samples, args.workers, slow_ms=self.pace or 0)

    def _callbacks(self, cell, start: int, end: int, calls_total: int) -> list:
        plan, args, inj = self.plan, self.args, self.args.injections
        samples = plan.samples_per_call
        self.pace = injection.LoaderPace(inj.slow_data) if inj.slow_data else None
        callbacks: list = [StepOrigin(start)]
        if inj:
            callbacks.append(injection.make_callback(inj, self.network, self.schedule,
                                                     str(plan.run_dir), args.hang_timeout, self.pace,
                                                     self.switches))
        if not args.no_hooks:
            from trainer_hooks.callback import DoctorCallback

            self.doctor = DoctorCallback(
                str(plan.run_dir), rank=plan.rank, world_size=plan.world, run=self.config["run"],
                config=self.config, tokens_per_step=samples * plan.preset.seq_length,
                grad_accum=plan.grad_accum, precision=plan.precision,
                expect_tokens_per_s=args.expect_tokens_per_s,
                expect={"hang_after_s": plan.hang_after_s}, update_every=args.update_every,
                heartbeat_s=args.heartbeat_s)
            callbacks.append(self.doctor)
        callbacks.append(checkpoint.make_callback(cell, plan.run_dir, plan.rank, plan.save_every,
                                                  args.keep, samples, end, self.control.protected))
        self.monitor = None
        if start == 0:   # its step column counts within one Model.train: not on a resumed run
            self.monitor = model.loss_monitor(calls_total, samples * plan.world)
            callbacks.append(self.monitor)
        callbacks.append(ConsoleLog(args.log_every, calls_total, run_dir=str(plan.run_dir)))
        return callbacks

"""Fault injection: ``--inject SPEC`` reproduces, on the real run, each symptom msdoctor knows.

``SPEC`` is a comma-separated list of forms (see :data:`FORMS`). Each fault acts on the real
training run, so the signals the hooks record are what the fault really does:

- ``nan@S``: from step S a weight (the final RMSNorm's) is NaN, so the loss is NaN from S on.
- ``spike@S``: the batch of step S is a shard of random tokens: one loss spike.
- ``periodic@K``: every K-th batch comes from the same corrupt (random-token) shard.
- ``stall@S``: from step S the learning rate is multiplied by 1e-9 (a unit error, not an
  intended zero): every update falls below fp32 resolution, the weights stop changing.
- ``slow-data@MS``: the loader sleeps per batch (one worker) MS ms, and at least
  ``SLOW_DATA_FACTOR`` times the step's compute time measured in this run, so the step waits for
  data however loaded the machine is (a loader merely as slow as the compute keeps up). It reads
  at most ``LoaderPace.AHEAD`` batches ahead, so the steps wait from the first on.
  ``slow-data@MS:FROM-TO``: a window, as storage that turns slow for a while: the batch of each
  step FROM..TO cannot be read before the training has finished the step before it, then
  takes MS ms (so read-ahead cannot hide it: each of those steps waits about MS ms); the steps
  before and after read data at full speed.
- ``lr-high``: the peak learning rate is 30x the preset's: the optimizer turns unstable, the
  gradient norm spikes again and again (GradNormSpikesRecurring) and the loss ends ~20 % above a
  clean run's. On the 1M-parameter presets the loss does not oscillate: AdamW with clipping
  absorbs it (measured from 3x to 300x the LR, batch 1-32, see docs/runbook.md).
- ``loss-scale-low``: fp16 with a fixed loss scale of 2^-16 (the reciprocal of the intended
  2^16, given as a constant instead of the dynamic update cell): the scale never moves and the
  scaled gradients underflow to zero in fp16, so the loss stays flat. (A fixed scale of 8 does not
  hurt this small model: its fp16 gradients are large enough.) The run still records the preset's
  dynamic window as ``loss_scale_window``.
- ``leak[@MB]``: every step keeps another MB (default 4) of host memory alive.
- ``hang@S``: step S blocks (process alive, heartbeats go on) until the stop file appears
  or ``--hang-timeout`` seconds pass, and at least ``HANG_STEPS`` times the median step period
  measured so far in this run, so it stands out as a hang however loaded the machine is.
- ``crash@S``: step S ends in an exception (as a device or communication error would):
  ``Model.train`` unwinds, the process exits with an error; ``--resume`` continues the run.
- ``accum-mismatch``: gradient accumulation done per call of the train cell (one micro-batch
  each), so the logged step counts micro-batches, not optimizer updates.
- ``grad-layer@S:L``: at step S decoder block L's gradients are multiplied by 1000 (before the
  norm and clipping): a gradient-norm spike whose culprit is ``layers.L``.
- ``nan-layer@S:L``: at step S decoder block L's output is made non-finite (NaN added): the loss
  is NaN, the update is skipped, and the first non-finite activation is block L's.
- ``frozen-layer:L``: decoder block L is left out of the optimizer (its weights stay at init).
- ``skip-load:L``: with ``--init-from CKPT``, block L's keys are skipped when loading.
- ``vocab-mismatch``: the embedding has fewer rows than the tokenizer's vocabulary.
- ``load-nothing``: with ``--init-from CKPT``, no key of the checkpoint is loaded (a converter
  whose names all miss): the run declares pretrained weights but starts from random init.
- ``init-scale@K``: before step 1 every weight matrix is multiplied by K (an initializer with
  a far too large scale): the first loss stands far above ln(vocab size).
- ``bad-data@S:N``: the N consecutive batches of the data stream from the one step S reads are
  garbage (the corrupt shard's rare tokens): the loss jumps and stays up for many steps. The
  garbage belongs to the data, so a run that skips those batches (``skip_batches``, a
  ``rollback``) never reads it again.

Parsing is standard library only (the CLI front end uses it without MindSpore).
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from trainer_hooks.wire import STOP_FILE

FORMS = ("nan@STEP", "spike@STEP", "periodic@K", "stall@STEP", "slow-data@MS", "lr-high",
         "loss-scale-low", "leak[@MB]", "hang@STEP", "accum-mismatch", "grad-layer@STEP:L",
         "nan-layer@STEP:L", "frozen-layer:L", "skip-load:L", "vocab-mismatch", "bad-data@STEP:N",
         "load-nothing", "init-scale@K", "slow-data@MS:FROM-TO", "crash@STEP")

#: name -> (argument required?, argument allowed?, minimum value)
_KINDS: Dict[str, tuple] = {
    "nan": (True, True, 1), "spike": (True, True, 1), "periodic": (True, True, 2),
    "stall": (True, True, 1), "slow-data": (True, True, 1), "hang": (True, True, 1),
    "leak": (False, True, 1), "lr-high": (False, False, 0), "loss-scale-low": (False, False, 0),
    "accum-mismatch": (False, False, 0), "vocab-mismatch": (False, False, 0),
    "bad-data": (True, True, 1), "load-nothing": (False, False, 0), "init-scale": (True, True, 2),
    "crash": (True, True, 1),
}
_FORM = re.compile(r"^(?P<name>[a-z-]+)(?:@(?P<arg>[^@,]*))?$")
#: Faults aimed at one decoder block: ``name@STEP:L`` or ``name:L``.
_LAYER_FORMS = {"grad-layer": True, "nan-layer": True, "frozen-layer": False, "skip-load": False}
_LAYER_FORM = re.compile(r"^(?P<name>[a-z-]+)(?:@(?P<step>\d+))?:(?P<layer>\d+)$")
GRAD_LAYER_FACTOR = 1000.0
VOCAB_SHORT_BY = 64

LR_HIGH_FACTOR = 30.0
LEAK_DEFAULT_MB = 4
STALL_LR_FACTOR = 1e-9
LOW_LOSS_SCALE = 2.0 ** -16
SLOW_DATA_FACTOR = 2.0
HANG_STEPS = 45   # JobHung waits 30 median steps (its median counts the compile step too)


class InjectionError(ValueError):
    """A malformed ``--inject`` value; the message is one line naming the valid forms."""


@dataclass
class Injections:
    """The parsed faults of one run (``None`` / False: not injected)."""

    nan: Optional[int] = None
    spike: Optional[int] = None
    periodic: Optional[int] = None
    stall: Optional[int] = None
    slow_data: Optional[int] = None
    hang: Optional[int] = None
    leak: Optional[int] = None
    lr_high: bool = False
    loss_scale_low: bool = False
    accum_mismatch: bool = False
    grad_layer: Optional[Tuple[int, int]] = None     # (step, block)
    nan_layer: Optional[Tuple[int, int]] = None      # (step, block)
    frozen_layer: Optional[int] = None
    skip_load: Optional[int] = None
    vocab_mismatch: bool = False
    bad_data: Optional[tuple] = None        # (first data batch, batches)
    load_nothing: bool = False
    init_scale: Optional[int] = None
    slow_window: Optional[Tuple[int, int]] = None   # slow-data only for these steps
    crash: Optional[int] = None
    spec: str = ""

    def __bool__(self) -> bool:
        return bool(self.spec)

    def as_config(self) -> Dict[str, object]:
        """The injected faults for the recorded config (only those present)."""
        found = {}
        for name in ("nan", "spike", "periodic", "stall", "slow_data", "hang", "leak", "init_scale",
                     "crash"):
            value = getattr(self, name)
            if value is not None:
                found[name.replace("_", "-")] = value
        for name in ("lr_high", "loss_scale_low", "accum_mismatch", "vocab_mismatch",
                     "load_nothing"):
            if getattr(self, name):
                found[name.replace("_", "-")] = True
        for name in ("grad_layer", "nan_layer", "frozen_layer", "skip_load"):
            value = getattr(self, name)
            if value is not None:
                found[name.replace("_", "-")] = list(value) if isinstance(value, tuple) else value
        if self.bad_data is not None:
            found["bad-data"] = {"step": self.bad_data[0], "batches": self.bad_data[1]}
        if self.slow_window is not None:
            found["slow-data-steps"] = list(self.slow_window)
        return found

    def blocks(self) -> List[int]:
        """The decoder blocks the per-layer faults name."""
        found = [v[1] for v in (self.grad_layer, self.nan_layer) if v is not None]
        return found + [v for v in (self.frozen_layer, self.skip_load) if v is not None]


def _fail(item: str, why: str) -> InjectionError:
    return InjectionError(f"bad --inject {item!r}: {why}; valid forms: {', '.join(FORMS)} "
                          "(comma-separated, STEP/K/MS/MB positive integers, L a decoder block from 0)")


def parse(spec: str) -> Injections:
    """Parse ``SPEC`` (e.g. ``"nan@300,slow-data@200"``); raises :class:`InjectionError`."""
    found = Injections(spec=(spec or "").strip())
    if not found.spec:
        return found
    seen: List[str] = []
    for item in (part.strip() for part in found.spec.split(",")):
        layered = _LAYER_FORM.match(item)
        if layered is not None and layered.group("name") in _LAYER_FORMS:
            name = layered.group("name")
            if name in seen:
                raise _fail(item, f"{name} given twice")
            seen.append(name)
            if _LAYER_FORMS[name] != (layered.group("step") is not None):
                raise _fail(item, f"{name} takes {'@STEP:L' if _LAYER_FORMS[name] else ':L'}")
            step, block = layered.group("step"), int(layered.group("layer"))
            if step is not None and int(step) < 1:
                raise _fail(item, "expected a step >= 1")
            setattr(found, name.replace("-", "_"), (int(step), block) if step else block)
            continue
        match = _FORM.match(item)
        if match is not None and match.group("name") in _LAYER_FORMS:
            raise _fail(item, f"{match.group('name')} takes "
                              f"{'@STEP:L' if _LAYER_FORMS[match.group('name')] else ':L'}")
        if not item or match is None or match.group("name") not in _KINDS:
            raise _fail(item, "unknown fault" if item else "empty item")
        name, arg = match.group("name"), match.group("arg")
        required, allowed, minimum = _KINDS[name]
        if name in seen:
            raise _fail(item, f"{name} given twice")
        seen.append(name)
        if arg is None:
            if required:
                raise _fail(item, f"{name} needs @{'K' if name == 'periodic' else 'N'}")
            value = LEAK_DEFAULT_MB if name == "leak" else True
        elif not allowed:
            raise _fail(item, f"{name} takes no @argument")
        elif name == "bad-data":
            first, _, count = arg.partition(":")
            if not (first.isdigit() and count.isdigit() and int(first) >= 1 and int(count) >= 1):
                raise _fail(item, f"expected STEP:N (integers >= 1) after '@', got {arg!r}")
            value = (int(first), int(count))
        elif name == "slow-data" and ":" in arg:
            ms, _, span = arg.partition(":")
            first, _, last = span.partition("-")
            if not (ms.isdigit() and first.isdigit() and last.isdigit() and int(ms) >= 1
                    and 1 <= int(first) <= int(last)):
                raise _fail(item, f"expected MS:FROM-TO (integers, 1 <= FROM <= TO) after '@', "
                                  f"got {arg!r}")
            value, found.slow_window = int(ms), (int(first), int(last))
        elif not arg.isdigit() or int(arg) < minimum:
            raise _fail(item, f"expected an integer >= {minimum} after '@', got {arg!r}")
        else:
            value = int(arg)
        setattr(found, name.replace("-", "_"), value)
    return found


class CorruptShard:
    """A corrupt shard (junk made of the corpus's rarest tokens); the batches the faults replace.

    ``counts`` are the corpus's token frequencies: the junk is drawn from the rarest tenth of the
    vocabulary, like mis-decoded binary data, so its loss stands far above the real batches'.
    """

    def __init__(self, injections: Injections, vocab_size: int, window: int, seed: int,
                 counts: Optional[np.ndarray] = None, windows: int = 64) -> None:
        rng = np.random.default_rng([seed, 0xBAD])
        pool = np.arange(2, vocab_size)
        if counts is not None:
            pool = pool[np.argsort(counts[2:vocab_size], kind="stable")][:max(1, vocab_size // 10)]
        self.tokens = rng.choice(pool, size=(windows, window)).astype(np.int32)
        self.spike, self.period = injections.spike, injections.periodic
        self.bad = injections.bad_data

    def __call__(self, step: int, within: int) -> Optional[np.ndarray]:
        """The replacement window for sample ``within`` of data batch ``step`` (the batch step
        ``step`` reads when nothing is skipped), or None (keep the real one)."""
        hit = (step == self.spike) or (self.period is not None and step % self.period == 0) or (
            self.bad is not None and self.bad[0] <= step < self.bad[0] + self.bad[1])
        if not hit:
            return None
        return self.tokens[(step * 7 + within) % len(self.tokens)]


def _await(ready, patience: float) -> None:
    """Poll ``ready()`` (the loader thread waiting for the training) until true, or ``patience``
    seconds have passed."""
    deadline = time.monotonic() + patience
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.002)


class SlowWindow:
    """``slow-data@MS:FROM-TO`` (see the module docstring): the loader calls :meth:`wait` per
    batch, the injector callback :meth:`reached` per step (plain int reads and writes across
    the two threads). The loader never waits for the training longer than ``patience`` s."""

    def __init__(self, ms: int, first: int, last: int, start: int = 0,
                 patience: float = 60.0) -> None:
        self.seconds, self.first, self.last = ms / 1000.0, first, last
        self.done, self.patience = start, patience

    def reached(self, step: int) -> None:
        self.done = step

    def wait(self, step: int) -> None:
        if not self.first <= step <= self.last:
            return
        _await(lambda: self.done >= step - 1, self.patience)
        time.sleep(self.seconds)


class LoaderPace:
    """The ``slow-data`` delay per batch: ``ms``, and at least ``factor`` x the step's compute.

    The injector callback feeds it each step's compute time (step begin to end, which excludes
    the wait for data); the loader thread reads :meth:`seconds`. Plain float reads and writes:
    no lock needed between the two threads.
    """

    #: batches the loader may read ahead of the training
    AHEAD = 2

    def __init__(self, ms: float, factor: float = SLOW_DATA_FACTOR, patience: float = 60.0
                 ) -> None:
        self.floor, self.factor, self.patience = ms / 1000.0, factor, patience
        self.compute_s = 0.0
        self.served = 0    # batches the loader has handed out
        self.done = 0      # steps the training has finished

    def note_compute(self, seconds: float) -> None:
        """One step's compute time (an EWMA, so one slow step does not stall the loader)."""
        self.compute_s = seconds if not self.compute_s else 0.8 * self.compute_s + 0.2 * seconds

    def seconds(self) -> float:
        return max(self.floor, self.factor * self.compute_s)

    def wait(self) -> None:
        """The loader's turn for one batch: once the training is at most :attr:`AHEAD` batches
        behind (never longer than ``patience`` s), the delay. Without that bound the loader
        would fill its prefetch queue during graph compilation, and the steps would wait for
        data only once that queue ran dry: later the longer the compile took (the more loaded
        the machine)."""
        _await(lambda: self.served - self.done < self.AHEAD, self.patience)
        self.served += 1
        time.sleep(self.seconds())


def make_callback(injections: Injections, network, schedule, run_dir: str, hang_timeout: float,
                  pace: Optional[LoaderPace] = None, switches: Optional[Dict[str, object]] = None,
                  note=None, window: Optional[SlowWindow] = None):
    """The MindSpore callback applying the step-triggered faults (nan, stall, leak, hang, slow-data,
    grad-layer and nan-layer through ``switches``: the train cell's ``boost`` gain and the probed
    block's ``poison``, scalar Parameters set at the step and reset after it, crash). ``note``
    (the trainer's :class:`~trainer_hooks.trainer.truth.Truth` ``note``) gets the hang's length
    and the crash."""
    from mindspore import Tensor
    from mindspore.train import Callback

    class Injector(Callback):
        """Applies ``--inject`` faults at the begin/end of the named steps."""

        def __init__(self) -> None:
            super().__init__()
            self.kept: List[np.ndarray] = []       # the leak: never released
            self.stop_path = os.path.join(run_dir, STOP_FILE)
            self.begun = 0.0
            self.periods: List[float] = []     # step begin to the next step's begin
            self.timed = 0

        def on_train_step_begin(self, run_context) -> None:
            step = run_context.original_args().cur_step_num
            if self.begun:
                self.periods.append(time.perf_counter() - self.begun)
            self.begun = time.perf_counter()
            if step == injections.nan:
                norm = next(p for p in network.trainable_params() if "norm_out" in p.name)
                norm.set_data(Tensor(np.full(norm.shape, np.nan, np.float32)))
            if step == injections.stall:
                schedule.scale.set_data(Tensor(STALL_LR_FACTOR, schedule.scale.dtype))
            if step == injections.hang:
                began = time.perf_counter()
                self._hang()
                if note is not None:
                    note("hang", step=int(step), s=time.perf_counter() - began)
            if injections.grad_layer is not None and step in (injections.grad_layer[0],
                                                              injections.grad_layer[0] + 1):
                boost(switches, injections.grad_layer[1], step == injections.grad_layer[0])
            if injections.nan_layer is not None and step in (injections.nan_layer[0],
                                                             injections.nan_layer[0] + 1):
                poison(switches, injections.nan_layer[1], step == injections.nan_layer[0])

        def on_train_step_end(self, run_context) -> None:
            if pace is not None:
                self.timed += 1
                pace.done = self.timed
                if self.timed > 1:                 # the first step includes the graph compile
                    pace.note_compute(time.perf_counter() - self.begun)
            if injections.leak:
                self.kept.append(np.ones(injections.leak * (1 << 20) // 8, np.float64))
            step = run_context.original_args().cur_step_num
            if window is not None:
                window.reached(int(step))
            if step == injections.crash:
                if note is not None:
                    note("crash", step=int(step))
                raise RuntimeError(f"injected crash at step {step} (--inject crash@{step})")

        def _hang(self) -> None:
            stale = _mtime(self.stop_path)
            typical = float(np.median(self.periods[1:])) if len(self.periods) > 1 else 0.0
            deadline = time.monotonic() + max(hang_timeout, HANG_STEPS * typical)
            while time.monotonic() < deadline and _mtime(self.stop_path) == stale:
                time.sleep(0.1)

    return Injector()


def scale_weights(network, factor: float) -> int:
    """Multiply every weight matrix (2-D and up) of ``network`` by ``factor`` (``init-scale``);
    how many were scaled."""
    from mindspore import Tensor

    scaled = 0
    for param in network.trainable_params():
        if len(param.shape) >= 2:
            param.set_data(Tensor(param.asnumpy() * factor))
            scaled += 1
    return scaled


def boost(switches: Optional[Dict[str, object]], block: int, on: bool) -> None:
    """Scale decoder block ``block``'s gradients by GRAD_LAYER_FACTOR (``on``) or by 1."""
    from mindspore import Tensor

    found = (switches or {}).get("boost")
    if found is None:
        return
    gain, names = found  # type: ignore[misc]
    values = np.zeros(len(names), np.float32)
    if on and f"layers.{block}" in names:
        values[list(names).index(f"layers.{block}")] = GRAD_LAYER_FACTOR - 1.0
    gain.set_data(Tensor(values))


def poison(switches: Optional[Dict[str, object]], block: int, on: bool) -> None:
    """Make decoder block ``block``'s output NaN (``on``) or leave it as it is."""
    from mindspore import Tensor

    target = ((switches or {}).get("poison") or {}).get(block)  # type: ignore[attr-defined]
    if target is not None:
        target.set_data(Tensor(float("nan") if on else 0.0, target.dtype))


def _mtime(path: str) -> Optional[int]:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None

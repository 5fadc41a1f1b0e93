"""A tiny real MindSpore causal LM and a ``train`` helper, for tests, benchmarks and the demo.

The network is an embedding, one residual MLP block and a tied-free output head
over synthetic token data that has learnable structure (each token is a fixed
function of the previous one, with some noise), so the loss really falls.
Training runs through ``mindspore.train.Model`` in GRAPH mode, exactly like a
user's job would, with :class:`~trainer_hooks.callback.DoctorCallback` installed.

A third input column, ``gain`` (float32, shape ``(1,)``), multiplies the
embeddings: it is 1.0 except on the step chosen by ``inject_nan_at``, where it is
``inf``, which makes the loss and every gradient non-finite (an honest overflow).

Run as ``python -m trainer_hooks.toy --run-dir DIR --steps N [--loss-scale] [--sink]``.
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np


@dataclass(frozen=True)
class ToyConfig:
    """Sizes of the toy LM; the defaults give a few ms per step on 2 CPU cores."""

    vocab: int = 256
    hidden: int = 64
    ffn: int = 128
    batch: int = 8
    seq: int = 32
    lr: float = 1e-2
    seed: int = 0


#: A bigger configuration whose steps are long enough that hook costs are measured
#: against a realistic step (used by the benchmark).
LARGE = ToyConfig(vocab=4096, hidden=256, ffn=1024, batch=16, seq=128)


class TokenSource:
    """Random-access synthetic token data: ``next = (3*prev + 1) % vocab``, 10% noise."""

    def __init__(self, size: int, config: ToyConfig, inject_nan_at: Optional[int] = None) -> None:
        self.size, self.config, self.inject_nan_at = size, config, inject_nan_at

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        cfg = self.config
        rng = np.random.default_rng(cfg.seed * 1_000_003 + index)
        tokens = np.empty((cfg.batch, cfg.seq + 1), np.int64)
        tokens[:, 0] = rng.integers(0, cfg.vocab, cfg.batch)
        for pos in range(1, cfg.seq + 1):
            tokens[:, pos] = (3 * tokens[:, pos - 1] + 1) % cfg.vocab
        noise = rng.random(tokens.shape) < 0.1
        tokens[noise] = rng.integers(0, cfg.vocab, int(noise.sum()))
        gain = np.inf if self.inject_nan_at is not None and index == self.inject_nan_at - 1 else 1.0
        return (tokens[:, :-1].astype(np.int32), tokens[:, 1:].astype(np.int32),
                np.array([gain], np.float32))


def dataset(size: int, config: ToyConfig = ToyConfig(), inject_nan_at: Optional[int] = None):
    """A seeded ``GeneratorDataset`` of ``size`` batches: (input_ids, labels, gain).

    ``inject_nan_at`` is a 1-based batch index within an epoch (it repeats every epoch).
    """
    import mindspore.dataset as ds

    return ds.GeneratorDataset(TokenSource(size, config, inject_nan_at),
                               column_names=["input_ids", "labels", "gain"],
                               shuffle=False, num_parallel_workers=1, python_multiprocessing=False)


def _network_class():
    from mindspore import nn, ops

    class ToyLM(nn.Cell):
        """Embedding -> residual GELU MLP -> vocabulary head; returns the mean token loss."""

        def __init__(self, config: ToyConfig) -> None:
            super().__init__()
            self.embed = nn.Embedding(config.vocab, config.hidden)
            self.up = nn.Dense(config.hidden, config.ffn)
            self.down = nn.Dense(config.ffn, config.hidden)
            self.head = nn.Dense(config.hidden, config.vocab)
            self.act = nn.GELU()
            self.vocab = config.vocab

        def construct(self, input_ids, labels, gain):
            x = self.embed(input_ids) * gain
            x = x + self.down(self.act(self.up(x)))
            logits = self.head(x).reshape((-1, self.vocab))
            return ops.cross_entropy(logits, labels.reshape((-1,)))

    return ToyLM


@dataclass
class Toy:
    """A compiled-once toy training setup: reuse it across ``Model.train`` calls."""

    config: ToyConfig
    network: Any
    optimizer: Any
    train_cell: Any
    model: Any
    loss_scale: bool = False
    runs: int = field(default=0)


def build(config: ToyConfig = ToyConfig(), *, loss_scale: bool = False,
          init_loss_scale: float = 2.0 ** 16, scale_window: int = 1000,
          clip_norm: Optional[float] = 1.0, per_layer: bool = False) -> Toy:
    """Build the network, optimizer, train cell and ``Model`` (GRAPH mode, fp32).

    ``loss_scale=False`` uses MindSpore's plain ``TrainOneStepCell`` (``Model(net,
    optimizer=...)``); ``True`` uses :class:`~trainer_hooks.cell.DoctorTrainOneStepCell`
    with a dynamic loss scale (``per_layer``: and per-layer gradient norms, docs/layers.md).
    """
    import mindspore as ms
    from mindspore import nn
    from mindspore.train import Model

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(config.seed)
    network = _network_class()(config)
    optimizer = nn.Adam(network.trainable_params(), learning_rate=config.lr)
    if loss_scale:
        from trainer_hooks.cell import DoctorTrainOneStepCell

        update = nn.DynamicLossScaleUpdateCell(init_loss_scale, 2, scale_window)
        train_cell = DoctorTrainOneStepCell(network, optimizer, scale_sense=update,
                                            clip_norm=clip_norm, per_layer=per_layer)
    else:
        train_cell = nn.TrainOneStepCell(network, optimizer)
    return Toy(config, network, optimizer, train_cell, Model(train_cell), loss_scale)


def train(run_dir: Optional[str], steps: int, *, loss_scale: bool = False, sink: bool = False,
          hooks: bool = True, inject_nan_at: Optional[int] = None, epochs: int = 1,
          toy: Optional[Toy] = None, config: ToyConfig = ToyConfig(),
          callbacks: Sequence[Any] = (), sink_size: int = -1,
          hook_options: Optional[Dict[str, Any]] = None,
          per_layer: bool = False) -> Dict[str, Any]:
    """Train ``steps`` optimizer steps (``epochs`` epochs of ``steps // epochs`` batches).

    Returns a summary: ``{"steps", "seconds", "steps_per_s", "callback"}``. ``toy``
    reuses an already built (and compiled) setup; otherwise one is built.
    """
    from mindspore.train import Model

    if steps % epochs:
        raise ValueError(f"steps={steps} must be a multiple of epochs={epochs}")
    toy = toy or build(config, loss_scale=loss_scale, per_layer=per_layer)
    data = dataset(steps // epochs, toy.config, inject_nan_at)
    cbs: List[Any] = list(callbacks)
    doctor = None
    if hooks:
        from trainer_hooks.callback import DoctorCallback

        cfg = toy.config
        options = {"run": f"toy-{os.getpid()}-{toy.runs}", "update_every": 10,
                   "config": {"model": "toy-lm", "seq_length": cfg.seq, "micro_batch": cfg.batch},
                   **(hook_options or {})}
        doctor = DoctorCallback(run_dir, **options)
        cbs.insert(0, doctor)
    toy.runs += 1
    model: Model = toy.model
    start = time.perf_counter()
    model.train(epochs, data, callbacks=cbs, dataset_sink_mode=sink, sink_size=sink_size)
    seconds = time.perf_counter() - start
    return {"steps": steps, "seconds": seconds, "steps_per_s": steps / seconds,
            "callback": doctor}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer_hooks.toy", description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", required=True, help="where events/rank-<N>.jsonl is written")
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps (default 200)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--loss-scale", action="store_true", help="DoctorTrainOneStepCell + dynamic loss scale")
    parser.add_argument("--per-layer", action="store_true",
                        help="with --loss-scale: per-layer gradient norms (layers events)")
    parser.add_argument("--sink", action="store_true", help="dataset_sink_mode=True")
    parser.add_argument("--inject-nan-at", type=int, default=None, metavar="STEP",
                        help="feed an inf input on this step (1-based, every epoch)")
    parser.add_argument("--large", action="store_true", help="the larger toy configuration")
    parser.add_argument("--expect-tokens-per-s", type=float, default=None, metavar="N",
                        help="baseline tokens/s per device, recorded in run_start.expect")
    args = parser.parse_args(argv)
    options = {"expect_tokens_per_s": args.expect_tokens_per_s} if args.expect_tokens_per_s else None
    summary = train(args.run_dir, args.steps, loss_scale=args.loss_scale, sink=args.sink,
                    inject_nan_at=args.inject_nan_at, epochs=args.epochs,
                    config=LARGE if args.large else ToyConfig(), hook_options=options,
                    per_layer=args.per_layer)
    print(f"trained {summary['steps']} steps in {summary['seconds']:.1f} s "
          f"({summary['steps_per_s']:.1f} steps/s); events in {args.run_dir}/events/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

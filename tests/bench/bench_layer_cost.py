"""In-graph cost of the per-layer signals: the train cell with per-layer gradient norms and
activation probes vs the plain cell, on the bundled trainer's tiny Llama, in ONE process.

Both cells are compiled first; then rounds of K steps alternate between them (A B, B A, ...; same
batch, so the work differs only by the signals). Each round is timed in CPU time of the whole
process (``time.process_time``: every thread MindSpore runs, so other jobs on the machine do not
count) and in wall time. Prints the median CPU and wall time per step of each cell, their ratio,
and the size of the one array each step copies to the host. Target: <= 1 % of a step. Run it
under ``nice`` on a shared machine; the CPU-time ratio is the figure to read.

Run: nice -n 15 .venv/bin/python tests/bench/bench_layer_cost.py [--rounds R] [--steps K]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GLOG_v", "3")


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--rounds", type=int, default=8)
    cli.add_argument("--steps", type=int, default=30)
    opts = cli.parse_args()

    import mindspore as ms
    import numpy as np
    from mindspore import Tensor, nn

    from trainer_hooks import probes
    from trainer_hooks.cell import DoctorTrainOneStepCell
    from trainer_hooks.trainer import model
    from trainer_hooks.trainer.presets import PRESETS
    from trainer_hooks.trainer.session import param_groups

    model.setup_context("CPU")
    preset = PRESETS["tiny"]

    def build(per_layer: bool):
        ms.set_seed(1)
        net = model.build_llama(preset, "fp32", "CPU")
        found, names, _ = probes.attach(net) if per_layer else ([], [], {})
        opt = nn.AdamWeightDecay(param_groups(net), learning_rate=1e-4)
        cell = DoctorTrainOneStepCell(net, opt, None, 1.0, per_layer=per_layer, probes=found,
                                      probe_names=names)
        cell.set_train()
        return cell

    cells = {"plain cell": build(False), "per-layer cell": build(True)}
    rng = np.random.default_rng(0)
    batch = Tensor(rng.integers(2, preset.vocab_size, (preset.micro_batch, preset.seq_length + 1),
                                dtype=np.int32))
    copied = 0
    for cell in cells.values():                      # compile
        out = cell(batch)
        if len(out) == 7:
            copied = out[5].asnumpy().nbytes
    cpu: dict = {name: [] for name in cells}
    wall: dict = {name: [] for name in cells}
    for r in range(opts.rounds):
        order = list(cells) if r % 2 == 0 else list(reversed(list(cells)))
        for name in order:
            cell = cells[name]
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(opts.steps):
                out = cell(batch)
                out[0].asnumpy()
                if len(out) == 7:
                    out[5].asnumpy()                 # the hooks' one copy per step
            cpu[name].append((time.process_time() - start_cpu) / opts.steps)
            wall[name].append((time.perf_counter() - start) / opts.steps)
    print(f"tiny preset ({preset.num_layers} blocks), {opts.rounds} rounds x {opts.steps} steps, "
          f"alternating; load {os.getloadavg()[0]:.1f}; median per step:")
    ratios = {}
    for kind, times in (("CPU", cpu), ("wall", wall)):
        median = {name: statistics.median(v) for name, v in times.items()}
        for name, value in median.items():
            spread = f"{min(times[name]) * 1e3:.1f}-{max(times[name]) * 1e3:.1f}"
            print(f"  {kind:<4} {name:<16} {value * 1e3:8.2f} ms  (rounds {spread} ms)")
        # the ratio of each A/B pair of rounds, so a load change between pairs cancels
        pairs = [b / a for a, b in zip(times["plain cell"], times["per-layer cell"])]
        ratios[kind] = statistics.median(pairs)
        print(f"  {kind:<4} per-layer / plain: {ratios[kind]:.4f} (median of {len(pairs)} "
              f"paired rounds; {min(pairs):.3f}-{max(pairs):.3f})")
    print(f"per-layer signals in the graph: {(ratios['CPU'] - 1) * 100:+.2f} % of a step in CPU "
          f"time, {(ratios['wall'] - 1) * 100:+.2f} % in wall time (target <= 1 %); host copy "
          f"per step: one array of {copied} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Write the example's training data: ``data/train.mindrecord`` of random token ids.

    python make_dataset.py [--dir data] [--samples 64] [--seq-length 32] [--vocab 256]

MindFormers' ``MindDataset`` loader reads ``input_ids`` of ``seq_length + 1`` tokens per sample.
"""
import argparse
import os

import numpy as np
from mindspore.mindrecord import FileWriter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="data")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--seq-length", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=256)
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, "train.mindrecord")
    for stale in (path, path + ".db"):
        if os.path.exists(stale):
            os.remove(stale)
    rng = np.random.default_rng(0)
    writer = FileWriter(path, shard_num=1)
    writer.add_schema({"input_ids": {"type": "int32", "shape": [-1]}}, "tokens")
    writer.write_raw_data([{"input_ids": rng.integers(3, args.vocab, args.seq_length + 1,
                                                      dtype=np.int32)} for _ in range(args.samples)])
    writer.commit()
    print(f"{path}: {args.samples} samples of {args.seq_length + 1} tokens")


if __name__ == "__main__":
    main()

"""Parsers of candidate set 18's held-out logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsers import megatron
from log_parsing import Row, parser


@parser("megatron_pdsh")
def megatron_pdsh(text: str) -> List[Row]:
    """Megatron(-DeepSpeed) ``iteration N/ M | ... | elapsed time per iteration (ms): T | learning rate: L
    | ... | lm loss: X | loss scale: S | grad norm: G | ...`` lines as relayed by the DeepSpeed/pdsh
    multi-node launcher, each prefixed with the sending node (``192.168.205.202:  iteration 1/ 20 | ...``).
    The ``node:`` prefix is dropped and every line is read as by ``megatron`` (values copied as printed,
    ms -> s); the launcher's own ``steps: N loss: X iter time (s): T`` lines are not iteration lines and
    are skipped."""
    return megatron("\n".join(re.sub(r"^[\w.-]+: ", "", line) for line in text.splitlines()))

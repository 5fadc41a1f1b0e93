"""Parsers of held-out candidate set 40's logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsers import llmc_rows
from log_parsing import Row, group, parser, rows_of


@parser("llmc_zscore")
def llmc_zscore(text: str) -> List[Row]:
    """llm.c ``step N/M | loss X (Zz)| norm G (Zz)| lr L | T ms | P% bf16 MFU | K tok/s`` with any printed
    z-score (``+nanz`` on the first steps, then e.g. ``-1.87z``); the z-scores and the MFU are not carried;
    step_time_s = T ms as seconds; lines cut before ``tok/s`` (a job killed mid-line) are not records."""
    return llmc_rows(text, r"[^)]*")


@parser("llmc_main_log")
def llmc_main_log(text: str) -> List[Row]:
    """llm.c ``main.log`` written beside the checkpoints: ``s:N trl:X lr:L norm:G`` training lines (step as
    printed, 0-based); the ``s:N tel:V`` (validation loss) and ``s:N eval:A`` (HellaSwag) lines are skipped."""
    return rows_of(r"^s:(\d+) trl:(\S+) lr:(\S+) norm:(\S+)$", text,
                   step=group(1), loss=group(2), lr=group(3), grad_norm=group(4))

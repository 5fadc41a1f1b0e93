"""More parsers of the corpus' logs from frameworks other than MindSpore (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, fairseq_rows, group, num, parser, rows_of

SWIFT_COLUMNS = {"loss": "loss", "grad_norm": "grad_norm", "lr": "learning_rate", "epoch": "epoch"}


@parser("swift_json_lines")
def swift_json_lines(text: str) -> List[Row]:
    """ms-swift console JSON lines ``{"loss": X, "acc": .., "grad_norm": G, "learning_rate": L, ...,
    "epoch": E, "global_step/max_steps": "N/M", ...}``; step = N; values as printed (``NaN`` -> nan)."""
    rows = []
    for line in text.splitlines():
        head = re.search(r'"global_step/max_steps": "(\d+)/\d+"', line)
        if not line.startswith('{"loss":') or not head:
            continue
        values = dict(re.findall(r'"([\w/()]+)": ([^,"}\s]+)', line))
        row = {"step": head.group(1)}
        row.update({column: num(values[key]) for column, key in SWIFT_COLUMNS.items() if key in values})
        rows.append(row)
    return rows


@parser("cpm_epoch_global_iteration")
def cpm_epoch_global_iteration(text: str) -> List[Row]:
    """CPM-2-Finetune ``epoch   E/ N | global iteration   I/ M | learning rate L | lm loss X | loss scale S
    |`` (eval lines skipped); step = I."""
    return rows_of(r"^epoch\s+(\d+)/\s*\d+ \| global iteration\s+(\d+)/\s*\d+ \| learning rate (\S+) \| "
                   r"lm loss (\S+) \| loss scale (\S+) \|", text,
                   step=group(2), loss=group(4), lr=group(3), loss_scale=group(5), epoch=group(1))


@parser("verse_train_iter")
def verse_train_iter(text: str) -> List[Row]:
    """MedicalDataAugmentationTool ``HH:MM:SS: train iter: N loss_net: X loss_scale: S norm: G ...``;
    ``seconds`` (the time of the whole logging interval) not carried."""
    return rows_of(r"train iter: (\d+) loss_net: (\S+) loss_scale: (\S+) norm: (\S+) ", text,
                   step=group(1), loss=group(2), grad_norm=group(4), loss_scale=group(3))


@parser("step_total_loss")
def step_total_loss(text: str) -> List[Row]:
    """``step: N total_loss: X obj_cls: ..`` (EPOS); ``global_step/sec`` lines not carried."""
    return rows_of(r"^step: (\d+) total_loss: (\S+) ", text, step=group(1), loss=group(2))


@parser("torchtune_step_gpu_resources")
def torchtune_step_gpu_resources(text: str) -> List[Row]:
    """Early torchtune console ``Step N | loss:X lr:Y gpu_resources:B`` (B = bytes of GPU memory, not
    carried)."""
    return rows_of(r"^Step (\d+) \| loss:(\S+) lr:(\S+) gpu_resources:\d+", text,
                   step=group(1), loss=group(2), lr=group(3))


@parser("modded_nanogpt_step")
def modded_nanogpt_step(text: str) -> List[Row]:
    """modded-nanogpt ``step:N/M train_loss:X train_time:Tms step_avg:Ams`` (train_time is cumulative and
    step_avg a running mean: neither carried); ``val_loss`` lines skipped."""
    return rows_of(r"^step:(\d+)/\d+ train_loss:(\S+) train_time:", text, step=group(1), loss=group(2))


@parser("fairseq_progress")
def fairseq_progress(text: str) -> List[Row]:
    """Legacy fairseq progress lines ``| epoch 001:   I / N loss=X, ..., num_updates=U, lr=L, gnorm=G, ...,
    loss_scale=S, ...`` (X is fairseq's running mean since the epoch start) and its overflow lines
    (``fairseq_rows``)."""
    return fairseq_rows(text, r"\| epoch (\d+):\s+\d+ / \d+ loss=([^,\s]+),.* num_updates=(\d+), "
                              r"lr=([^,\s]+), gnorm=([^,\s]+),.* loss_scale=([^,\s]+),")

"""Parsers of the corpus' MindSpore, MindFormers and MindYOLO logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import Dict, List

from log_parsing import Row, flag, group, num, one_number, parser, rows_of, seconds


@parser("mindspore_lossmonitor")
def mindspore_lossmonitor(text: str) -> List[Row]:
    """MindSpore LossMonitor ``epoch: E step: S, loss is X`` with TimeMonitor ``per step time``
    lines; step = (E - 1) * max(S) + S as msdoctor's mindspore reader computes it."""
    rows: List[Row] = []
    pending: List[Row] = []
    spans = []
    for m in re.finditer(r"epoch: (\d+) step: (\d+), loss is (\S+)|per step time: ([\d.]+) ms", text):
        if m.group(1):
            row = {"epoch": m.group(1), "_s": m.group(2), "loss": num(m.group(3))}
            rows.append(row)
            pending.append(row)
        else:
            spans.append((list(pending), m.group(4)))
            pending = []
    for covered, ms in spans:
        for row in covered:
            row["step_time_s"] = seconds(ms)
    per_epoch = max((int(r["_s"]) for r in rows), default=0)
    for row in rows:
        row["step"] = str((int(row["epoch"]) - 1) * per_epoch + int(row.pop("_s")))
    return rows




@parser("mindyolo")
def mindyolo(text: str) -> List[Row]:
    """MindYOLO loss line, its ``step time`` line, and ``loss scale adjust to X`` warnings
    (attributed to the next loss line: overflow 1, loss_scale X); step = (E - 1) * N + S."""
    rows: Dict[str, Row] = {}
    scale = None
    for line in text.split("\n"):
        m = re.search(r"loss scale adjust to (\S+)", line)
        if m:
            scale = m.group(1)
            continue
        m = re.search(r"Epoch (\d+)/\d+, Step (\d+)/(\d+), imgsize \S+ \S+ loss: (\S+), .* "
                      r"cur_lr: (\S+)", line)
        if m:
            step = str((int(m.group(1)) - 1) * int(m.group(3)) + int(m.group(2)))
            row = {"step": step, "loss": num(m.group(4)), "lr": num(m.group(5)), "epoch": m.group(1)}
            if scale is not None:
                row["loss_scale"], row["overflow"], scale = num(scale), "1", None
            rows[step] = row
            continue
        m = re.search(r"Epoch (\d+)/\d+, Step (\d+)/(\d+), step time: ([\d.]+) ms", line)
        if m:
            step = str((int(m.group(1)) - 1) * int(m.group(3)) + int(m.group(2)))
            if step in rows:
                rows[step]["step_time_s"] = seconds(m.group(4))
    return list(rows.values())


@parser("mindformers")
def mindformers(text: str) -> List[Row]:
    """MindFormers MFLossMonitor ``{ Epoch:[e/E], step:[s/S], loss: x, per_step_time: Nms, lr: ..,
    overflow cond: .., loss_scale: ..[, global_norm: [..]]``; step = (e - 1) * S + s."""
    return rows_of(
        r"\{ Epoch:\[\s*(\d+)/\s*\d+\], step:\[\s*(\d+)/\s*(\d+)\], loss:\s*\[?([^,/\]\s]+)[^,]*, "
        r"per_step_time: (\d+)ms(?:, lr: \[?([^,\]\s]+)\]?)?, overflow cond: ([^,\n]+), "
        r"loss_scale: ([^,\s]+)(?:, global_norm:? (?:\[\s*([^\],]*?)\s*\]|([^,\s]+)))?", text,
        step=lambda m: str((int(m.group(1)) - 1) * int(m.group(3)) + int(m.group(2))),
        loss=group(4), grad_norm=lambda m: one_number(m.group(9) or m.group(10)),
        lr=group(6), loss_scale=group(8),
        overflow=group(7, flag), step_time_s=group(5, seconds), epoch=group(1))


@parser("mindformers_train_line")
def mindformers_train_line(text: str) -> List[Row]:
    """MindFormers parallel-core ``train: Epoch:E, Step:S, Loss: X, Finite_grads: B, Loss_scale: Y,
    Learning_rate: (L,...), Time: T ms``; overflow = not Finite_grads; lr = the first group's."""
    return rows_of(r"train: Epoch:(\d+), Step:(\d+), Loss: ([^,\s]+), Finite_grads: (\w+), "
                   r"Loss_scale: ([^,\s]+), Learning_rate: \(([^,)\s]+)[^)]*\), Time: ([\d.]+) ms", text,
                   step=group(2), loss=group(3), lr=group(6), loss_scale=group(5),
                   overflow=lambda m: "0" if flag(m.group(4)) == "1" else "1",
                   step_time_s=group(7, seconds), epoch=group(1))


@parser("epoch_loss_time")
def epoch_loss_time(text: str) -> List[Row]:
    """Epoch-level ``Epoch:[E/N], loss:X , time:Ts``; step = epoch, step_time_s = the epoch's time."""
    return rows_of(r"Epoch:\[(\d+)/\d+\], loss:(\S+) , time:([\d.]+)s", text,
                   step=group(1), loss=group(2), step_time_s=group(3), epoch=group(1))


@parser("epoch_step_loss_is")
def epoch_step_loss_is(text: str) -> List[Row]:
    """``epoch: E, step: S, loss is X`` (a hand-written loop, S counts within the run)."""
    return rows_of(r"epoch: (\d+), step: (\d+), loss is (\S+)", text,
                   step=group(2), loss=group(3), epoch=group(1))


@parser("modelzoo_yolo_epoch_iter")
def modelzoo_yolo_epoch_iter(text: str) -> List[Row]:
    """MindSpore ModelZoo YOLO ``epoch[E], iter[I], loss:X, fps:F imgs/sec, lr:L, per step time: Tms``
    (I counts within the epoch); step = (E - 1) * N + I, N (steps per epoch, not printed) from the
    first epoch change: N = I before it + the in-epoch interval between the first two records - I
    after it; before any epoch change step = I."""
    found = re.findall(r"epoch\[(\d+)\], iter\[(\d+)\], loss:([^,\s]+), fps:[^,]*, lr:([^,\s]+), "
                       r"per step time: ([\d.]+)ms", text)
    per_epoch = 0
    if len(found) > 1 and found[0][0] == found[1][0]:
        interval = int(found[1][1]) - int(found[0][1])
        for (e1, i1, *_), (e2, i2, *_) in zip(found, found[1:]):
            if e2 != e1:
                per_epoch = int(i1) + interval - int(i2)
                break
    return [{"step": str((int(e) - 1) * per_epoch + int(i)), "loss": num(loss), "lr": num(lr),
             "step_time_s": seconds(ms), "epoch": e} for e, i, loss, lr, ms in found]


@parser("orb_epoch_metrics")
def orb_epoch_metrics(text: str) -> List[Row]:
    """MindSpore Orb (MindChemistry) ``Epoch: E/N,`` then `` train_metrics: {..., 'train_time': T, ...,
    'loss': X}`` (one summary per epoch); step = E as printed (0-based), step_time_s = the epoch's
    train_time (seconds), loss = the train_metrics loss (val_metrics lines skipped)."""
    return rows_of(r"Epoch: (\d+)/\d+, \n train_metrics: \{[^}]*'train_time': ([\d.eE+-]+),[^}]*"
                   r"'loss': ([^,}\s]+)\}", text,
                   step=group(1), loss=group(3), step_time_s=group(2), epoch=group(1))


@parser("mindcv_epoch")
def mindcv_epoch(text: str) -> List[Row]:
    """MindCV ``mindcv.utils.callbacks INFO - Epoch: [E/N], batch: [B/B], loss: X, lr: L, time: Ts`` (one
    line per epoch: the loss of the epoch's last batch, the epoch's train time); step = E, step_time_s = T
    (seconds per epoch); validation lines skipped."""
    return rows_of(r"Epoch: \[(\d+)/\d+\], batch: \[\d+/\d+\], loss: ([^,\s]+), lr: ([^,\s]+), "
                   r"time: ([\d.]+)s", text,
                   step=group(1), loss=group(2), lr=group(3), step_time_s=group(4), epoch=group(1))

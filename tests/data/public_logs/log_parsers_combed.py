"""Parsers of held-out candidate set 32's logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import Dict, List

from log_parsing import Row, group, num, parser, rows_of


@parser("tf_global_step_loss_sec_per_step")
def tf_global_step_loss_sec_per_step(text: str) -> List[Row]:
    """TensorFlow slim / Object Detection API ``global step N: loss = X (T sec/step)`` (with an
    ``INFO:tensorflow:`` or a glog ``I0422 ... learning.py:507]`` prefix): step N, loss X, step_time_s T. The
    logger prints each record twice (once per handler); a line equal in step, loss and time to the record before
    it is that record again and is skipped."""
    rows: List[Row] = []
    for m in re.finditer(r"global step (\d+): loss = (\S+) \(([\d.]+) sec/step\)", text):
        row = {"step": m.group(1), "loss": num(m.group(2)), "step_time_s": m.group(3)}
        if rows and rows[-1] == row:
            continue
        rows.append(row)
    return rows


@parser("iteration_eq_loss_eq")
def iteration_eq_loss_eq(text: str) -> List[Row]:
    """``HH:MM:SS INFO     iteration=N loss=X`` (INSTA): step N, loss X."""
    return rows_of(r"iteration=(\d+) loss=(\S+)", text, step=group(1), loss=group(2))


@parser("epoch_colon_loss_accuracy")
def epoch_colon_loss_accuracy(text: str) -> List[Row]:
    """``Epoch: N, Loss: X, Accuracy: A`` (SiaNet): one record per epoch, step = the epoch N as printed;
    loss X (the accuracy is not carried)."""
    return rows_of(r"^Epoch: (\d+), Loss: ([^,\s]+), Accuracy:", text, step=group(1), loss=group(2))


@parser("batch_step_loss")
def batch_step_loss(text: str) -> List[Row]:
    """``<date> <time>,<ms>:INFO: batch step: N loss: X``: step N, loss X."""
    return rows_of(r"batch step: (\d+) loss: (\S+)$", text, step=group(1), loss=group(2))


@parser("caffe_solver_iteration")
def caffe_solver_iteration(text: str) -> List[Row]:
    """Caffe solver console: ``solver.cpp:...] Iteration N, loss = X`` (newer Caffe: ``Iteration N (R iter/s,
    Ts/K iters), loss = X``) gives loss X, ``Iteration N, lr = L`` gives lr L; both merged into the row of step N
    (rows in order of first appearance). ``Train net output``, ``Test net output`` and ``Testing net`` lines are
    skipped (the per-output values are not the solver's smoothed loss)."""
    rows: Dict[str, Row] = {}
    for line in text.splitlines():
        m = re.search(r"\] Iteration (\d+)(?: \([^)]*\))?, loss = (\S+)", line)
        if m:
            rows.setdefault(m.group(1), {"step": m.group(1)})["loss"] = num(m.group(2))
            continue
        m = re.search(r"\] Iteration (\d+), lr = ([^,\s]+)", line)
        if m:
            rows.setdefault(m.group(1), {"step": m.group(1)})["lr"] = num(m.group(2))
    return list(rows.values())


@parser("darkflow_step_loss_moving_ave")
def darkflow_step_loss_moving_ave(text: str) -> List[Row]:
    """darkflow ``step N - loss X - moving ave loss M``: step N, loss X (the moving average is not carried);
    ``Finish K epoch(es)`` lines skipped."""
    return rows_of(r"^step (\d+) - loss (\S+) - moving ave loss \S+$", text, step=group(1), loss=group(2))

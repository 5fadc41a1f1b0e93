"""Parsers of held-out candidate set 47's logs (see ``convert.py``): an Ultralytics YOLO ``results.csv``, a Keras
``CSVLogger`` file and Python-logging ``Epoch N: Train Loss=X, Val Loss=Y`` lines."""
from __future__ import annotations

import csv
import io
from typing import Dict, List

from log_parsing import Row, group, num, parser, rows_of


def stripped_csv(text: str) -> List[Dict[str, str]]:
    """The lines of a CSV text with a header line as dicts, names and cells stripped of the spaces some writers pad
    them with; empty lines skipped."""
    reader = csv.reader(io.StringIO(text))
    header = [name.strip() for name in next(reader)]
    return [dict(zip(header, (cell.strip() for cell in cells))) for cells in reader if cells]


def epoch_rows(text: str, loss: str, lr: str) -> List[Row]:
    """One row per line of a CSV text with an ``epoch`` column: step = the epoch as printed, the loss from column
    ``loss``, the learning rate from column ``lr`` where the line has it."""
    rows = []
    for line in stripped_csv(text):
        row = {"step": line["epoch"], "loss": num(line[loss])}
        if line.get(lr):
            row["lr"] = num(line[lr])
        rows.append(row)
    return rows


@parser("ultralytics_results_csv")
def ultralytics_results_csv(text: str) -> List[Row]:
    """Ultralytics YOLO (v8 and later) ``results.csv``, one line per epoch ``epoch,[time,]train/box_loss,
    train/cls_loss,train/dfl_loss,metrics/..,val/..,lr/pg0,lr/pg1,lr/pg2`` (older versions pad names and cells with
    spaces); step = the epoch as printed, loss = ``train/box_loss`` (the file has no total loss; the class and DFL
    losses are not carried), lr = ``lr/pg0``; the cumulative ``time``, metrics and validation losses not carried."""
    return epoch_rows(text, "train/box_loss", "lr/pg0")


@parser("keras_csvlogger")
def keras_csvlogger(text: str) -> List[Row]:
    """Keras ``CSVLogger`` file: a header line ``epoch,acc,loss,val_acc,val_loss[,lr]`` (any columns, any order),
    then one line per epoch; step = the epoch as printed (Keras counts from 0), loss = ``loss``, lr = ``lr`` when
    logged; the metrics and validation columns are not carried."""
    return epoch_rows(text, "loss", "lr")


@parser("epoch_train_loss_eq_val_loss_eq")
def epoch_train_loss_eq_val_loss_eq(text: str) -> List[Row]:
    """Python-logging lines ``<date> <time>,<ms> INFO:Epoch N: Train Loss=X, Val Loss=Y`` (EmoNetTCN), one per
    epoch; step = N, loss = X; the validation loss and the time stamps are not carried."""
    return rows_of(r"INFO:Epoch (\d+): Train Loss=([^,\s]+), Val Loss=\S+$", text, step=group(1), loss=group(2))

"""Parsers of held-out candidate set 30's logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, group, num, parser, rows_of


@parser("tacotron2_train_overflow")
def tacotron2_train_overflow(text: str) -> List[Row]:
    """NVIDIA tacotron2 ``train.py`` console: ``Train loss N X Grad Norm G Ts/it`` (``Train iter N loss X ...`` in
    older versions; markdown ``**`` around part of a line tolerated) gives step N, loss X, grad_norm G,
    step_time_s T. Overflow lines print no iteration: apex ``Gradient overflow.  Skipping step, loss scaler 0
    reducing loss scale to S`` (overflow 1, loss_scale S, the scale after the skip) and the old fp16_optimizer's
    ``OVERFLOW! Skipping step. Attempted loss scale: S`` (overflow 1 only; S is the scale that overflowed, not the
    one in use afterwards). Their step = the last printed N + the running count of overflow lines since it; an
    overflow whose step is that of the next printed record is merged into that record (the iteration that
    overflowed and still printed its line, e.g. with ``Grad Norm inf``)."""
    rows: List[Row] = []
    pending: List[Row] = []
    last = 0
    for line in text.splitlines():
        m = re.search(r"Train (?:loss|iter)\s+(\d+)(?: loss)? ([^\s*]+)\**\s+Grad Norm (\S+) ([\d.]+)s/it", line)
        if m:
            row = {"step": m.group(1), "loss": num(m.group(2)), "grad_norm": num(m.group(3)),
                   "step_time_s": m.group(4)}
            for over in pending:
                if over["step"] == m.group(1):
                    row.update({k: v for k, v in over.items() if k != "step"})
                else:
                    rows.append(over)
            pending = []
            rows.append(row)
            last = int(m.group(1))
            continue
        m = re.search(r"Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale to (\S+)$", line)
        if m:
            pending.append({"step": str(last + len(pending) + 1), "loss_scale": num(m.group(1)), "overflow": "1"})
            continue
        if re.search(r"OVERFLOW! Skipping step\. Attempted loss scale: \S+$", line):
            pending.append({"step": str(last + len(pending) + 1), "overflow": "1"})
    return rows + pending


@parser("tf_arrow_step_loss_accuracy")
def tf_arrow_step_loss_accuracy(text: str) -> List[Row]:
    """A TensorFlow script's ``= >   step: N loss: X accuracy:A`` training lines; step = N, loss = X. The
    ``= >  = = = = = =  > > > > > >    step: N ...`` lines (a second report of the same step, per the issue an
    evaluation) are skipped; accuracy is not carried."""
    return rows_of(r"^= >   step: (\d+) loss: (\S+) accuracy:", text, step=group(1), loss=group(2))


@parser("deep_avsr_step_tr_loss")
def deep_avsr_step_tr_loss(text: str) -> List[Row]:
    """deep_avsr ``pretrain.py`` ``Step: NNN || Tr.Loss: X  Val.Loss: V || Tr.CER: .. Val.CER: .. || Tr.WER: ..
    Val.WER: ..``: one line per training "step" (an epoch of the curriculum stage); step = NNN as printed
    (zero-padded), loss = X (training); validation loss and error rates are not carried."""
    return rows_of(r"^Step: (\d+) \|\| Tr\.Loss: (\S+)\s", text, step=group(1), loss=group(2))

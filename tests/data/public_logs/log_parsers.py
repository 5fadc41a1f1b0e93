"""Parsers of the corpus' logs from frameworks other than MindSpore (see ``convert.py``)."""
from __future__ import annotations

import csv
import io
import json
import re
from typing import Dict, List, Tuple

from log_parsing import Row, add_present, fairseq_rows, group, num, parser, rows_of, seconds

OLMO_COLUMNS = {"grad_norm": "optim/total_grad_norm", "tokens_per_s": "throughput/device/tokens_per_second"}
HF_COLUMNS = {"grad_norm": "grad_norm", "lr": "learning_rate", "epoch": "epoch"}


@parser("nanogpt_iter")
def nanogpt_iter(text: str) -> List[Row]:
    """nanoGPT ``iter N: loss X, time Yms, mfu Z%`` (lit-llama's fine-tuning prints ``time: Yms``)."""
    return rows_of(r"iter (\d+): loss ([^,\s]+), time:? ([\d.]+)ms", text,
                   step=group(1), loss=group(2), step_time_s=group(3, seconds))


@parser("litgpt_iter")
def litgpt_iter(text: str) -> List[Row]:
    """lit-gpt ``iter N step M: loss X, iter time: Yms``; step = iter (micro-batch)."""
    return rows_of(r"^iter (\d+) step \d+: loss ([^,\s]+), iter time: ([\d.]+)ms", text,
                   step=group(1), loss=group(2), step_time_s=group(3, seconds))


@parser("epoch_loss")
def epoch_loss(text: str) -> List[Row]:
    """``epoch: N loss: X`` (one line per iteration)."""
    return rows_of(r"^epoch: (\d+) loss: (\S+)", text, step=group(1), loss=group(2))


@parser("olmo_blocks")
def olmo_blocks(text: str) -> List[Row]:
    """OLMo metric blocks ``[step=N/M,epoch=E]`` followed by ``name=value`` lines."""
    rows = []
    for block in re.split(r"(?=^\S.*\[step=)", text, flags=re.M):
        head = re.search(r"\[step=(\d+)/\d+,epoch=(\d+)\]", block)
        loss = re.search(r"train/CrossEntropyLoss=(\S+)", block)
        if not head or not loss:
            continue
        found = {name: m.group(1) for name in OLMO_COLUMNS.values()
                 if (m := re.search(re.escape(name) + r"=(\S+)", block))}
        row = add_present({"step": head.group(1), "loss": num(loss.group(1))}, OLMO_COLUMNS, found)
        row["epoch"] = head.group(2)
        rows.append(row)
    return rows


@parser("basicsr_iter")
def basicsr_iter(text: str) -> List[Row]:
    """BasicSR-style ``[epoch: E, iter: N, lr:(X,)] l_pix: V``."""
    return rows_of(r"\[epoch:\s*(\d+), iter:\s*([\d,]+), lr:\(([\d.e+-]+),\)\] l_pix: (\S+)", text,
                   step=group(2), loss=group(4), lr=group(3), epoch=group(1))


@parser("hf_trainer_state")
def hf_trainer_state(text: str) -> List[Row]:
    """HF ``trainer_state.json``: the ``log_history`` entries that carry a training ``loss``."""
    rows = []
    for entry in json.loads(text)["log_history"]:
        if "loss" not in entry:
            continue
        rows.append(add_present({"step": str(entry["step"]), "loss": num(str(entry["loss"]))}, HF_COLUMNS,
                                {key: str(value) for key, value in entry.items()}))
    return rows


def hf_dict_values(text: str) -> Dict[str, str]:
    """The ``'key': value`` pairs of one printed HF Trainer log dict, values as printed."""
    return dict(re.findall(r"'(\w+)':\s*([^,}\s]+)", text))


@parser("hf_dict_lines")
def hf_dict_lines(text: str) -> List[Row]:
    """HF Trainer console dicts ``{'loss': X, 'grad_norm': Y, 'learning_rate': Z, 'epoch': E}``;
    they carry no step: step = running record count (1-based)."""
    rows: List[Row] = []
    for line in text.splitlines():
        if "{'loss':" not in line:
            continue
        values = hf_dict_values(line[line.index("{"):line.index("}") + 1])
        rows.append(add_present({"step": str(len(rows) + 1)}, {"loss": "loss", **HF_COLUMNS}, values))
    return rows


@parser("webui_step_dict_lines")
def webui_step_dict_lines(text: str) -> List[Row]:
    """text-generation-webui training console ``Step: N {'loss': X, 'grad_norm': Y, 'learning_rate': Z,
    'epoch': E}`` (the HF Trainer's log dicts behind the webui's own counter); step = N as printed,
    dicts without a ``'loss'`` (the closing ``train_runtime`` summary) skipped."""
    rows: List[Row] = []
    for m in re.finditer(r"^Step:\s+(\d+) (\{'loss':[^}]*\})", text, re.M):
        values = hf_dict_values(m.group(2))
        rows.append(add_present({"step": m.group(1)}, {"loss": "loss", **HF_COLUMNS}, values))
    return rows


@parser("minimind")
def minimind(text: str) -> List[Row]:
    """minimind ``Epoch:[E/N](S/M) loss:X lr:Y``; step = in-epoch step."""
    return rows_of(r"^Epoch:\[(\d+)/\d+\]\((\d+)/\d+\) loss:(\S+) lr:(\S+) ", text,
                   step=group(2), loss=group(3), lr=group(4), epoch=group(1))


@parser("kronos")
def kronos(text: str) -> List[Row]:
    """Kronos ``[Rank 0, Epoch E/N, Step S/M] LR X, Loss: Y``; step = (E - 1) * M + S."""
    return rows_of(r"\[Rank 0, Epoch (\d+)/\d+, Step (\d+)/(\d+)\] LR (\S+), Loss: (\S+)", text,
                   step=lambda m: str((int(m.group(1)) - 1) * int(m.group(3)) + int(m.group(2))),
                   loss=group(5), lr=group(4), epoch=group(1))


@parser("tf_epoch_cost")
def tf_epoch_cost(text: str) -> List[Row]:
    """``Epoch: NNNN cost= X`` then ``time this epoch= T`` (seconds); step = epoch."""
    whole = lambda m: str(int(m.group(1)))  # noqa: E731
    return rows_of(r"Epoch: (\d+) cost= (\S+)\n\ttime this epoch= (\S+)", text,
                   step=whole, loss=group(2), step_time_s=group(3), epoch=whole)


@parser("niftynet")
def niftynet(text: str) -> List[Row]:
    """NiftyNet ``Training iter N, loss=X (Ys)``."""
    return rows_of(r"Training iter (\d+), loss=(\S+) \(([\d.]+)s\)", text,
                   step=group(1), loss=group(2), step_time_s=group(3))


@parser("count_train_loss")
def count_train_loss(text: str) -> List[Row]:
    """``train loss:X`` lines without a step: step = running record count (1-based)."""
    return [{"step": str(i), "loss": num(m.group(1))}
            for i, m in enumerate(re.finditer(r"train loss:(\S+)", text), 1)]


@parser("ppasr")
def ppasr(text: str) -> List[Row]:
    """PPASR ``Train epoch: E, batch: B/N, loss: X, learning rate: Y, train time: Ts``."""
    return rows_of(r"Train epoch: (\d+), batch: (\d+)/\d+, loss: (\S+), learning rate: (\S+), "
                   r"train time: ([\d.]+)s", text,
                   step=group(2), loss=group(3), lr=group(4), step_time_s=group(5), epoch=group(1))


@parser("mmengine")
def mmengine(text: str) -> List[Row]:
    """MMEngine ``Epoch(train) [E][I/N]  lr: ..  time: ..  loss: ..  grad_norm: ..``."""
    return rows_of(r"Epoch\(train\) \[(\d+)\]\[(\d+)/\d+\]\s+lr: (\S+)\s+eta: \S+\s+time: (\S+)\s+"
                   r"data_time: \S+\s+memory: \d+\s+loss: (\S+)\s+grad_norm: (\S+)", text,
                   step=group(2), loss=group(5), grad_norm=group(6), lr=group(3),
                   step_time_s=group(4), epoch=group(1))


@parser("mlx_iter")
def mlx_iter(text: str) -> List[Row]:
    """mlx-lm ``Iter N: Train loss X, Learning Rate Y, It/sec Z, Tokens/sec T, ...``."""
    return rows_of(r"Iter (\d+): Train loss ([^,\s]+), (?:Learning Rate ([^,\s]+), )?It/sec [^,\s]+, "
                   r"Tokens/sec ([^,\s]+)", text,
                   step=group(1), loss=group(2), lr=group(3), tokens_per_s=group(4))


@parser("apex_overflow")
def apex_overflow(text: str) -> List[Row]:
    """apex ``Gradient overflow. Skipping step, ... reducing loss scale to X``: one skipped step
    each; no step printed: step = running record count (1-based)."""
    return [{"step": str(i), "loss_scale": num(m.group(1)), "overflow": "1"}
            for i, m in enumerate(re.finditer(r"reducing loss scale to (\S+)", text), 1)]


@parser("megatron")
def megatron(text: str) -> List[Row]:
    """Megatron ``iteration N/ M | ... | elapsed time per iteration (ms): T | learning rate: L |
    ... | lm loss: X | loss scale: S | grad norm: G | ...``."""
    fields = {"lm loss": "loss", "grad norm": "grad_norm", "learning rate": "lr",
              "loss scale": "loss_scale"}
    rows = []
    for line in text.splitlines():
        head = re.match(r"\s*iteration\s+(\d+)/", line)
        if not head:
            continue
        row = {"step": head.group(1)}
        for part in line.split("|"):
            name, _, value = part.partition(":")
            name = name.strip()
            if name in fields:
                row[fields[name]] = num(value)
            elif name == "elapsed time per iteration (ms)":
                row["step_time_s"] = seconds(value)
        rows.append(row)
    return rows


@parser("informer")
def informer(text: str) -> List[Row]:
    """Informer ``iters: I, epoch: E | loss: X`` with the following ``speed: Ts/iter`` line;
    step = (E - 1) * Steps + I, Steps from the epoch summary ``Steps: N``."""
    per_epoch = int(re.search(r"Steps: (\d+)", text).group(1))  # type: ignore[union-attr]
    rows: List[Row] = []
    for m in re.finditer(r"iters: (\d+), epoch: (\d+) \| loss: (\S+)|speed: ([\d.]+)s/iter", text):
        if m.group(1):
            rows.append({"step": str((int(m.group(2)) - 1) * per_epoch + int(m.group(1))),
                         "loss": num(m.group(3)), "epoch": m.group(2)})
        elif rows and "step_time_s" not in rows[-1]:
            rows[-1]["step_time_s"] = num(m.group(4))
    return rows


@parser("e2e_mlt")
def e2e_mlt(text: str) -> List[Row]:
    """E2E-MLT ``epoch E[I], loss: X, lr: Y``; step = the bracketed iteration."""
    return rows_of(r"^epoch (\d+)\[(\d+)\], loss: ([^,\s]+), lr: (\S+)", text,
                   step=group(2), loss=group(3), lr=group(4), epoch=group(1))


LIGHTNING_LOSS_COLUMNS = ("train_loss_step", "train_loss", "loss")


@parser("lightning_metrics_csv")
def lightning_metrics_csv(text: str) -> List[Row]:
    """PyTorch Lightning CSVLogger ``metrics.csv`` (``epoch,step,...``): one row per line that
    carries the training loss, the first of ``train_loss_step``, ``train_loss``, ``loss`` in the
    header; validation and epoch-summary lines (loss cell empty) skipped; step as printed."""
    return lightning_rows(text, LIGHTNING_LOSS_COLUMNS)


def lightning_rows(text: str, columns: Tuple[str, ...]) -> List[Row]:
    """The rows of a Lightning ``metrics.csv`` whose loss is the first of ``columns`` in its
    header; lines with an empty loss cell skipped; step and epoch as printed."""
    reader = csv.DictReader(io.StringIO(text))
    key = next(c for c in columns if c in (reader.fieldnames or ()))
    rows = []
    for line in reader:
        if not (line.get(key) or "").strip():
            continue
        row = {"step": line["step"].strip(), "loss": num(line[key])}
        if (line.get("epoch") or "").strip():
            row["epoch"] = line["epoch"].strip()
        rows.append(row)
    return rows


@parser("tsv_step_loss")
def tsv_step_loss(text: str) -> List[Row]:
    """A tab-separated ``step<TAB>loss`` table (header line skipped)."""
    return rows_of(r"^(\d+)\t(\S+)$", text, step=group(1), loss=group(2))


PIPE_FIELDS = {"loss": "loss", "norm": "grad_norm", "lr": "lr", "tok/sec": "tokens_per_s"}


def pipe_row(step: str, fields: str, names: Dict[str, str]) -> Row:
    """A row of ``step`` from ``name: value | name: value ...`` text: the fields ``names`` maps to
    columns, and ``dt: Tms`` as step_time_s (ms -> s)."""
    row: Row = {"step": step}
    for part in fields.split("|"):
        name, _, value = part.strip().partition(":")
        if name in names:
            row[names[name]] = num(value)
        elif name == "dt" and value.strip().endswith("ms"):
            row["step_time_s"] = seconds(value.strip()[:-2])
    return row


@parser("nanogpt_pipe_fields")
def nanogpt_pipe_fields(text: str) -> List[Row]:
    """build-nanogpt / nanochat console ``step N[/M (p%)] | loss: X | ... | dt: Tms | tok/sec: K |
    norm: G | lr: L`` (fields in any order; other fields such as ``lrm`` or ``mfu`` ignored)."""
    rows = []
    for line in text.splitlines():
        head = re.match(r"step\s+(\d+)(?:/\d+)?(?: \([\d.]+%\))? \|", line)
        if not head:
            continue
        rows.append(pipe_row(str(int(head.group(1))), line.split("|", 1)[1], PIPE_FIELDS))
    return rows


@parser("llmc")
def llmc(text: str) -> List[Row]:
    """llm.c ``step N/M | loss X (+nanz)| norm G (+nanz)| lr L | T ms | P% bf16 MFU | K tok/s``."""
    return llmc_rows(text, r"\+nanz")


def llmc_rows(text: str, zscore: str) -> List[Row]:
    """The rows of llm.c's console lines whose loss and norm z-scores match ``zscore``."""
    return rows_of(r"^step\s+(\d+)/\d+ \| loss\s+(\S+) \(" + zscore + r"\)\| norm\s+(\S+) \("
                   + zscore + r"\)\| lr (\S+) \| ([\d.]+) ms \| [^|]*\| (\d+) tok/s", text,
                   step=group(1), loss=group(2), grad_norm=group(3), lr=group(4),
                   step_time_s=group(5, seconds), tokens_per_s=group(6))


@parser("megatron_old")
def megatron_old(text: str) -> List[Row]:
    """Early Megatron-LM ``iteration N/ M | elapsed time per iteration (ms): T | learning rate L |
    lm loss X | loss scale S |`` (no colon after the metric names)."""
    return rows_of(r"^\s*iteration\s+(\d+)/\s*\d+ \| elapsed time per iteration \(ms\): ([\d.]+) \| "
                   r"learning rate (\S+) \| lm loss (\S+) \| loss scale (\S+) \|", text,
                   step=group(1), loss=group(4), lr=group(3), loss_scale=group(5),
                   step_time_s=group(2, seconds))


@parser("torchtitan")
def torchtitan(text: str) -> List[Row]:
    """torchtitan ``step: N  loss: X  [grad_norm: G  ]memory: ..  tps: K  tflops: ..  mfu: ..``;
    tps (tokens per second per device) as printed without thousands separators."""
    return rows_of(r"step:\s*(\d+)\s+loss:\s+(\S+)\s+(?:grad_norm:\s+(\S+)\s+)?memory:\s+\S+\s+"
                   r"tps: ([\d,]+)", text,
                   step=group(1), loss=group(2), grad_norm=group(3), tokens_per_s=group(4))


@parser("deepspeed_overflow_tqdm")
def deepspeed_overflow_tqdm(text: str) -> List[Row]:
    """HF Trainer + DeepSpeed console: tqdm ``n/N [..]`` counters, DeepSpeed ``OVERFLOW! Rank 0
    Skipping step. Attempted loss scale: X, reducing to Y`` printed after the counter on the same
    line, and Trainer ``{'loss': ..}`` dicts. step = the tqdm counter (steps done) on the overflow's
    line (overflow 1, loss_scale Y) or the last counter before a loss dict; overflow lines without a
    counter are skipped; rows at the same step are merged."""
    rows: Dict[str, Row] = {}
    last = None
    for line in text.split("\n"):
        counter = re.search(r"(\d+)/\d+ \[[^\]]*\]", line)
        if counter:
            last = counter.group(1)
        m = re.search(r"Attempted loss scale: (\S+), reducing to (\S+)", line)
        if m and counter:
            row = rows.setdefault(counter.group(1), {"step": counter.group(1)})
            row["loss_scale"], row["overflow"] = num(m.group(2)), "1"
        elif "{'loss':" in line and last is not None:
            values = hf_dict_values(line[line.index("{"):line.index("}") + 1])
            row = rows.setdefault(last, {"step": last})
            add_present(row, {"loss": "loss", **HF_COLUMNS}, values)
    return list(rows.values())


@parser("fairseq_epoch")
def fairseq_epoch(text: str) -> List[Row]:
    """Legacy fairseq epoch summaries ``| epoch NNN | loss X | ... | num_updates N | lr L | gnorm G
    | ... | loss_scale S | ...`` (validation lines skipped) and its overflow lines (``fairseq_rows``)."""
    return fairseq_rows(text, r"\| epoch (\d+) \| loss (\S+) \|.*\| num_updates (\d+) \| lr (\S+) \| "
                              r"gnorm (\S+) \|.*\| loss_scale (\S+) \|")


@parser("epoch_time_lr_train_loss")
def epoch_time_lr_train_loss(text: str) -> List[Row]:
    """Epoch-level console blocks ``Epoch: E/N`` / ``Time Taken: Ts - LR: L`` / ``Train Loss: X - ...``;
    step = epoch, step_time_s = the epoch's time."""
    return rows_of(r"^Epoch: (\d+)/\d+\nTime Taken: ([\d.]+)s - LR: (\S+)\nTrain Loss: (\S+)", text,
                   step=group(1), loss=group(4), lr=group(3), step_time_s=group(2), epoch=group(1))


@parser("pips_step")
def pips_step(text: str) -> List[Row]:
    """PIPs ``<run name>; step NNNNNN/M; rtime R; itime T; loss = X`` (T = whole iteration time in
    seconds, R = its data-reading part); step = the zero-padded counter as an integer."""
    return rows_of(r"; step (\d+)/\d+; rtime ([\d.]+); itime ([\d.]+); loss = (\S+)", text,
                   step=lambda m: str(int(m.group(1))), loss=group(4), step_time_s=group(3),
                   data_wait_s=group(2))


@parser("pytorch_word_lm")
def pytorch_word_lm(text: str) -> List[Row]:
    """PyTorch word_language_model ``| epoch   E |   B/ N batches | lr L | ms/batch T | loss X | ppl P``
    (B counts within the epoch); step = (E - 1) * N + B; end-of-epoch validation lines skipped."""
    return rows_of(r"^\| epoch\s+(\d+) \|\s+(\d+)/\s*(\d+) batches \| lr (\S+) \| ms/batch\s+([\d.]+) \| "
                   r"loss\s+(\S+) \|", text,
                   step=lambda m: str((int(m.group(1)) - 1) * int(m.group(3)) + int(m.group(2))),
                   loss=group(6), lr=group(4), step_time_s=group(5, seconds), epoch=group(1))


@parser("torchtune_step")
def torchtune_step(text: str) -> List[Row]:
    """torchtune console ``Step N | loss:X lr:Y tokens_per_second_per_gpu:Z``."""
    return rows_of(r"^Step (\d+) \| loss:(\S+) lr:(\S+) tokens_per_second_per_gpu:(\S+)", text,
                   step=group(1), loss=group(2), lr=group(3), tokens_per_s=group(4))


@parser("paddlenlp_trainer")
def paddlenlp_trainer(text: str) -> List[Row]:
    """PaddleNLP Trainer ``loss: X, learning_rate: Y, global_step: N, interval_runtime: .., ...,
    epoch: E`` (interval figures cover the logging interval, not one step: not carried)."""
    return rows_of(r"loss: (\S+), learning_rate: (\S+), global_step: (\d+), interval_runtime: [^,]+, "
                   r"interval_samples_per_second: [^,]+, interval_steps_per_second: [^,]+, "
                   r"epoch: (\S+)$", text,
                   step=group(3), loss=group(1), lr=group(2), epoch=group(4))


@parser("r2c_train_epoch")
def r2c_train_epoch(text: str) -> List[Row]:
    """r2c (AllenNLP) epoch summaries ``TRAIN EPOCH  E:`` then a pandas table ``loss  X`` ...
    ``sec_per_batch  S``; step = E as printed (0-based), step_time_s = sec_per_batch."""
    return rows_of(r"^TRAIN EPOCH\s+(\d+):\nloss\s+(\S+)\n(?:\w+\s+\S+\n)*?sec_per_batch\s+(\S+)$", text,
                   step=group(1), loss=group(2), step_time_s=group(3), epoch=group(1))


@parser("yolact_iter")
def yolact_iter(text: str) -> List[Row]:
    """YOLACT ``[ E]  ITER || B: .. | C: .. | M: .. | S: .. | T: X || ETA: .. || timer: S`` (loss = T, the
    total; step_time_s = timer) and apex ``Gradient overflow.  Skipping step, ... reducing loss scale to
    X`` lines (overflow 1, loss_scale X; no iteration printed: step = the last ITER + the running count
    of overflow lines since it)."""
    rows: List[Row] = []
    last, since = 0, 0
    for line in text.splitlines():
        m = re.search(r"\[\s*(\d+)\]\s+(\d+) \|\|.*\| T: (\S+) \|\| ETA: [^|]*\|\| timer: ([\d.]+)", line)
        if m:
            last, since = int(m.group(2)), 0
            rows.append({"step": m.group(2), "loss": num(m.group(3)), "step_time_s": m.group(4),
                         "epoch": m.group(1)})
            continue
        m = re.search(r"Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale "
                      r"to (\S+)$", line)
        if m:
            since += 1
            rows.append({"step": str(last + since), "loss_scale": num(m.group(1)), "overflow": "1"})
    return rows


@parser("step_colon_loss")
def step_colon_loss(text: str) -> List[Row]:
    """``<date> <time> Step:N, loss:X`` (PFNL); other lines (eval, ``Model collapsed with loss=``,
    which print no step) skipped."""
    return rows_of(r"Step:(\d+), loss:(\S+)$", text, step=group(1), loss=group(2))


@parser("tf_pose_train")
def tf_pose_train(text: str) -> List[Row]:
    """tf-pose-estimation ``epoch=E step=N, S examples/sec lr=L, loss=X, ...`` (validation lines
    skipped; examples/sec not carried)."""
    return rows_of(r"epoch=(\S+) step=(\d+), \S+ examples/sec lr=([^,\s]+), loss=([^,\s]+),", text,
                   step=group(2), loss=group(4), lr=group(3), epoch=group(1))

"""Rebuild the step tables (``<id>.csv``) of the public-log corpus from the raw excerpts (``<id>.txt``).

Each manifest entry names a ``parser``: one of :data:`PARSERS`, a function from the excerpt's text
to rows (dicts of column -> text). Values are copied as printed; the only changes are dropping
thousands separators, spelling non-finite values ``nan``/``inf``/``-inf``, milliseconds -> seconds
(exact decimal shift) and ``overflow`` flags as ``1``/``0``. Steps are computed only where the
manifest notes say so (global step from epoch and in-epoch step, or a running record count).

    python tests/data/public_logs/convert.py            # rewrite every CSV
    python tests/data/public_logs/convert.py --check    # exit 1 if a CSV differs from its rebuild
    python tests/data/public_logs/convert.py ID ...     # only these logs
    python tests/data/public_logs/convert.py --check --corpus DIR   # another copy of the corpus

Nothing in the excerpts is executed: JSON is parsed with ``json``, everything else with regexes.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Callable, Dict, List, Optional

import yaml

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.yaml"
#: Columns in the order they are written; a CSV has only those its log carries.
COLUMNS = ("step", "loss", "grad_norm", "lr", "loss_scale", "overflow", "step_time_s",
           "tokens_per_s", "epoch")

Row = Dict[str, str]
Parser = Callable[[str], List[Row]]
PARSERS: Dict[str, Parser] = {}


def parser(name: str) -> Callable[[Parser], Parser]:
    def register(fn: Parser) -> Parser:
        PARSERS[name] = fn
        return fn
    return register


def num(text: str) -> str:
    """A number as printed, without thousands separators; non-finite values spelled nan/inf/-inf."""
    value = text.strip().rstrip(",").replace(",", "")
    low = value.lower()
    if low in ("nan", "-nan", "+nan"):
        return "nan"
    if low in ("inf", "+inf", "infinity", "+infinity"):
        return "inf"
    if low in ("-inf", "-infinity"):
        return "-inf"
    return value


def seconds(ms: str) -> str:
    """Milliseconds as printed -> seconds, by an exact decimal shift."""
    return format((Decimal(num(ms)) / Decimal(1000)).normalize(), "f")


def one_number(text: Optional[str]) -> Optional[str]:
    """A value that is one number, else None (not recorded): ``[1 31049]`` is not a number."""
    if text is None or not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(nan|inf)",
                                        text.strip(), re.I):
        return None
    return num(text)


def flag(text: str) -> str:
    return "1" if text.strip().strip("[]").strip().lower() in ("true", "1") else "0"


def rows_of(pattern: str, text: str, **columns: Callable[[re.Match], str]) -> List[Row]:
    """One row per match of ``pattern``; each column computed from the match."""
    rows = []
    for m in re.finditer(pattern, text, re.M):
        rows.append({name: get(m) for name, get in columns.items() if get(m) is not None})
    return rows


def add_present(row: Row, columns: Dict[str, str], values: Dict[str, str]) -> Row:
    """``row`` with ``column = num(values[key])`` for each ``column: key`` that ``values`` holds."""
    row.update({column: num(values[key]) for column, key in columns.items() if key in values})
    return row


def group(i: int, convert: Callable[[str], str] = num) -> Callable[[re.Match], Optional[str]]:
    return lambda m: None if m.group(i) is None else convert(m.group(i))


@parser("nanogpt_iter")
def nanogpt_iter(text: str) -> List[Row]:
    """nanoGPT ``iter N: loss X, time Yms, mfu Z%``."""
    return rows_of(r"iter (\d+): loss ([^,\s]+), time ([\d.]+)ms", text,
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


OLMO_COLUMNS = {"grad_norm": "optim/total_grad_norm", "tokens_per_s": "throughput/device/tokens_per_second"}
HF_COLUMNS = {"grad_norm": "grad_norm", "lr": "learning_rate", "epoch": "epoch"}


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


def to_csv(rows: List[Row]) -> str:
    columns = [c for c in COLUMNS if any(c in r for r in rows)]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in columns})
    return out.getvalue()


def load_manifest(path: Path = MANIFEST) -> Dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def rebuild(entry: Dict, directory: Path = HERE) -> str:
    """The CSV text of one manifest entry, rebuilt from its excerpt."""
    if entry.get("parser") not in PARSERS:
        raise ValueError(f"{entry.get('id')}: unknown parser {entry.get('parser')!r}; "
                         f"expected one of {', '.join(sorted(PARSERS))}")
    with open(directory / f"{entry['id']}.txt", encoding="utf-8", newline="") as handle:
        text = handle.read()
    return to_csv(PARSERS[entry["parser"]](text))


def main(argv: Optional[List[str]] = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("ids", nargs="*", help="only these logs (default: all)")
    args.add_argument("--check", action="store_true", help="compare, do not write")
    args.add_argument("--corpus", type=Path, default=HERE, help="corpus directory (default: this one)")
    opts = args.parse_args(argv)
    entries = [e for e in load_manifest(opts.corpus / "manifest.yaml")["logs"]
               if not opts.ids or e["id"] in opts.ids]
    differing = []
    for entry in entries:
        text = rebuild(entry, opts.corpus)
        target = opts.corpus / f"{entry['id']}.csv"
        if opts.check:
            if not target.exists() or target.read_bytes() != text.encode("utf-8"):
                differing.append(entry["id"])
        else:
            target.write_bytes(text.encode("utf-8"))
        print(f"{entry['id']}: {text.count(chr(10)) - 1} records")
    if differing:
        print("differ from their rebuild: " + ", ".join(differing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

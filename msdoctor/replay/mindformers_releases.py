"""MindFormers step lines of the releases whose layout is not 1.0-1.9's ``MFLossMonitor`` line.

Each layout is taken from the format string of that release's source
(``docs/formats/mindformers.md`` lists the commits):

- **0.x** (0.3 - 0.6), ``MFLossMonitor.print_output_info`` in
  ``mindformers/core/callback/callback.py``, no ``{`` and no progress line::

      Epoch:[%3d/%3d], step:[%5d/%5d], loss:[%5.3f/%5.3f], time:%5.3f ms, lr:%s, overflow cond: %s, loss_scale: %s

  (``lr:%s, `` only when a learning rate is known; ``time`` is milliseconds).
- **PyNative trainer**, ``LossCallback._print_log`` in ``mindformers/pynative/callback/loss_callback.py``
  (the step counts from the start of training, no epoch, no loss scale)::

      { step:[%5d/%5d], loss: %10.6f, per_step_time: %6dms, lr: %10.6e, grad_norm: %10.6f, throughput: %6.2fT }

  as 1.9 writes it (``grad_norm: NaN`` when the norm was not computed: not recorded);
  the first PyNative trainer wrote ``{ step:[%5d/%5d], loss: %.6f, per_step_time: %dms, lr: %.6e }``.

The lines are found anywhere in a line (after any logging prefix), as the 1.x line is.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Pattern, Tuple

import numpy as np

from msdoctor.replay.numbers import flags, floats
from msdoctor.replay.recording import Block, Recording

_VALUE = r"(?:\[[^\]\n]*\]|[^,\n]*?)"            # a numpy repr ``[x]`` or the bare text


@dataclass(frozen=True)
class Layout:
    """One release's step line: a substring every such line holds and its named-group regex."""

    name: str
    mark: str
    pattern: Pattern[str]
    shape: str                                     # the line as an error message shows it
    absent: Dict[str, FrozenSet[str]] = field(default_factory=dict)   # field -> "not recorded" texts


LEGACY = Layout(
    "MindFormers 0.x MFLossMonitor", "], time:",
    re.compile(r"Epoch:\[\s*(?P<epoch>\d+)/\s*\d+\], step:\[\s*(?P<step>\d+)/\s*(?P<per_epoch>\d+)\], "
               r"loss:\[(?P<loss>[^/\]\n]*)/[^\]\n]*\], time:\s*(?P<ms>[^,\n]*?) ms, "
               r"(?:lr:(?P<lr>" + _VALUE + r"), )?"
               r"overflow cond: (?P<overflow>[^,\n]*), loss_scale: (?P<scale>" + _VALUE + r")[ \t]*$",
               re.M),
    "'Epoch:[e/E], step:[s/S], loss:[x/mean], time:N ms, lr:x, overflow cond: ..., loss_scale: ...'")
PYNATIVE = Layout(
    "MindFormers PyNative trainer LossCallback", "{ step:[",
    re.compile(r"\{ step:\[\s*(?P<step>\d+)/\s*\d+\], loss:\s*(?P<loss>[^,\n]*?), "
               r"per_step_time:\s*(?P<ms>[^,\n]*?)ms"
               r"(?:, lr:\s*(?P<lr>[^,\n]*?))?(?:, grad_norm:\s*(?P<norm>[^,\n]*?))?"
               r"(?:, throughput:\s*(?P<throughput>[^,\n]*?)T)? \}[ \t]*$", re.M),
    "'{ step:[s/S], loss: x, per_step_time: Nms, lr: x, grad_norm: x, throughput: xT }'",
    {"norm": frozenset(("NaN",))})
LAYOUTS = (LEGACY, PYNATIVE)
#: group -> (event field, scale); ``overflow`` is read as a flag.
FIELDS: Dict[str, Tuple[str, float]] = {
    "loss": ("loss", 1.0), "ms": ("step_time_s", 1e-3), "lr": ("lr", 1.0),
    "scale": ("loss_scale", 1.0), "norm": ("grad_norm", 1.0),
}

Times = Callable[[List[str]], np.ndarray]


def sniff(text: str) -> bool:
    """True if ``text`` holds a step line of one of these layouts."""
    return any(layout.mark in text and layout.pattern.search(text) for layout in LAYOUTS)


def shapes() -> str:
    """The layouts, for an error message."""
    return "; ".join(f"{layout.name}'s {layout.shape}" for layout in LAYOUTS)


def parse_block(text: str, path: str, first_line: int, out: Recording,
                times: Times) -> Optional[Block]:
    """The step block of one text block (whole lines) in whichever of these layouts it holds."""
    lines = text.split("\n")
    for layout in LAYOUTS:
        if layout.mark not in text:
            continue
        block = _parse(layout, lines, path, first_line, out, times)
        if block is not None:
            return block
    return None


def _parse(layout: Layout, lines: List[str], path: str, first_line: int, out: Recording,
           times: Times) -> Optional[Block]:
    picked: List[Tuple[int, str]] = []
    rows: List[Dict[str, str]] = []
    for i, line in enumerate(lines):
        if layout.mark not in line:
            continue
        m = layout.pattern.search(line)
        if m is None:
            out.problems.add(path, first_line + i,
                             f"not a complete {layout.name} step line (expected {layout.shape}), "
                             f"got {line[max(0, line.find(layout.mark) - 12):][:120]!r}")
            continue
        picked.append((i, line))
        rows.append({k: v or "" for k, v in m.groupdict().items()})
    if not rows:
        return None

    def column(group: str) -> List[str]:
        absent = layout.absent.get(group, frozenset())
        return ["" if row[group].strip() in absent else row[group] for row in rows]

    def check(label: str, result: Tuple) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        values, mask, bad = result
        for row, message in bad:
            out.problems.add(path, first_line + picked[row][0],
                             f"{layout.name} step line, {label}: {message}")
        return values, mask

    step = np.array([int(row["step"]) for row in rows], dtype=np.int64)
    if "epoch" in rows[0]:
        epoch = np.array([int(row["epoch"]) for row in rows], dtype=np.int64)
        step = (epoch - 1) * np.array([int(row["per_epoch"]) for row in rows], dtype=np.int64) + step
    columns: Dict[str, Tuple[np.ndarray, Optional[np.ndarray]]] = {}
    for group, (name, scale) in FIELDS.items():
        if group in rows[0] and any(column(group)):
            values, mask = check(name, floats(column(group)))
            columns[name] = (values * scale, mask)
    if "overflow" in rows[0]:
        columns["overflow"] = check("overflow cond", flags(column("overflow")))
    columns = {k: v for k, v in columns.items() if v[1] is None or v[1].any()}
    return Block(step, times([line for _, line in picked]), columns)

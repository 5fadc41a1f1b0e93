"""The report's recovery tables: each run's goodput by cause, and its checkpoints marked."""
from __future__ import annotations

from html import escape
from typing import Any, Dict, List

from msdoctor.core.format import duration
from msdoctor.core.goodput import CAUSES


def goodput_table(goodput: Dict[str, Any]) -> str:
    """Per run: goodput and the wall time lost by cause."""
    if not goodput:
        return ""
    causes = CAUSES
    head = "".join(f"<th>{escape(c.replace('_', ' '))}</th>" for c in causes)
    rows = []
    for run, g in goodput.items():
        ratio = "-" if g.get("ratio") is None else f"{100.0 * g['ratio']:.1f} %"
        cells = "".join(f"<td>{duration(g['badput_s'].get(c, 0.0))}</td>" for c in causes)
        rows.append(f"<tr><td>{escape(run)}</td><td><b>{ratio}</b></td>"
                    f"<td>{duration(g['wall_s'])}</td><td>{duration(g['productive_s'])}</td>{cells}</tr>")
    return ("<h2>Goodput</h2><p class=\"facts\">Productive training time over wall time; the "
            "badput columns are the wall time lost per cause (docs/checkpoints.md).</p>"
            "<table><tr><th>Run</th><th>Goodput</th><th>Wall</th><th>Productive</th>"
            + head + "</tr>" + "".join(rows) + "</table>")


def checkpoint_table(items: List[Dict[str, Any]]) -> str:
    """Every checkpoint saved, the poisoned ones and the last good one marked."""
    if not items:
        return ""
    rows = []
    for c in items:
        if c.get("poisoned_by"):
            state = f"<span style=\"color:#b00020\"><b>poisoned</b> ({escape(c['poisoned_by'])})</span>"
        elif c.get("last_good"):
            state = "<span class=\"none\">last good</span>"
        else:
            state = "ok"
        size = f"{c['size_bytes'] / 1e6:.1f} MB" if c.get("size_bytes") else "-"
        save = duration(c["save_s"]) if c.get("save_s") is not None else "-"
        rows.append(f"<tr><td>{c['rank']}</td><td>{c['step']}</td><td>{state}</td><td>{size}</td>"
                    f"<td>{save}</td><td>{escape(str(c.get('path') or '-'))}</td></tr>")
    return ("<h2>Checkpoints</h2><table><tr><th>Rank</th><th>Step</th><th>State</th><th>Size</th>"
            "<th>Save</th><th>Path</th></tr>" + "".join(rows) + "</table>")

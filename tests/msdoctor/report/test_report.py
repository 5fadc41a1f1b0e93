"""``msdoctor report``: one self-contained HTML page with charts, alert markers and fixes."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import logformats as L

REPO = Path(__file__).resolve().parents[3]


def _log_with_a_nan(tmp_path: Path) -> Path:
    losses = L.loss_curve(300, seed=2)
    losses[149] = float("nan")
    path = tmp_path / "rank_0" / "info.log"
    path.parent.mkdir()
    L.write(path, L.mf_lines(losses, grad_norms=[1.0 + (i % 5) / 10 for i in range(300)],
                             steps_per_epoch=300, overflow_at=[50, 51]))
    return path


def test_the_page_has_the_four_charts_the_alert_marker_and_the_fix(tmp_path):
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "msdoctor", "report", str(_log_with_a_nan(tmp_path)),
                           "-o", str(out), "--seq-length", "256"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    svgs = re.findall(r"<svg.*?</svg>", html, flags=re.S)
    titles = [re.search(r'aria-label="([^"]*)"', s).group(1) for s in svgs]
    assert titles[:2] == ["Loss (raw, and a moving average)", "Gradient global norm"]
    assert titles[2].startswith("Loss scale (red ticks: 2 overflow steps)")
    assert "Throughput (tokens/s per device)" in titles and "Learning rate" in titles
    for svg in svgs:                                     # each chart is well-formed XML
        ElementTree.fromstring(svg)
    assert "LossNonFinite (critical) rank 0 step 150" in html      # the marker's tooltip
    assert "Fix: Stop and resume from the last good checkpoint" in html
    assert "<script" not in html and "src=" not in html and "@import" not in html
    assert "no alert fired" not in html.lower()


def test_a_png_is_refused_with_one_line_saying_to_write_html(tmp_path):
    out = tmp_path / "report.png"
    done = subprocess.run([sys.executable, "-m", "msdoctor", "report", str(_log_with_a_nan(tmp_path)),
                           "-o", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not out.exists()
    assert done.stderr.count("\n") == 1 and "write .html" in done.stderr and str(out) in done.stderr


def test_a_spool_run_directory_reports_too(tmp_path):
    from msdoctor.wire import encode, make

    run_dir = tmp_path / "run"
    (run_dir / "events").mkdir(parents=True)
    with open(run_dir / "events" / "rank-0.jsonl", "wb") as fh:
        for step in range(1, 101):
            fh.write(encode(make("step", 0, step=step, t=float(step), loss=3.0 - step / 100,
                                 grad_norm=1.0, loss_scale=1024.0, tokens=512.0, step_time_s=0.25)))
    out = tmp_path / "r.html"
    done = subprocess.run([sys.executable, "-m", "msdoctor", "report", str(run_dir), "-o", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert "<b>spool</b> input" in html and "100 step records" in html
    assert html.count("<path d=\"M") >= 4                 # loss raw + smoothed, norm, scale, tput


def test_the_report_imports_only_the_core_and_itself():
    import ast

    for path in sorted((REPO / "msdoctor" / "report").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.startswith("msdoctor."):
                    assert name.startswith(("msdoctor.core", "msdoctor.wire", "msdoctor.report")), \
                        f"{path.name} imports {name}"


def test_a_tree_with_a_rank_that_crashed_before_its_first_step_lists_the_rank_its_error_and_hint(tmp_path):
    import logging

    t0 = 1_750_000_000.0
    trained = tmp_path / "output" / "log" / "rank_0" / "info.log"
    trained.parent.mkdir(parents=True)
    L.write(trained, L.mf_lines(L.loss_curve(30), grad_norms=[1.0] * 30, steps_per_epoch=30, t0=t0))
    crashed = tmp_path / "output" / "log" / "rank_1" / "error.log"
    crashed.parent.mkdir()
    L.write(crashed, [L.mf_line("Malloc device memory failed, size[4294967296]", t0 + 5, logging.ERROR)])
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "msdoctor", "report", str(tmp_path / "output"),
                           "-o", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    ranks = html[html.index("<h2>Ranks</h2>"):html.index("<h2>Training curves</h2>")]
    assert "<td>1</td><td>0</td>" in ranks
    assert "crashed before its first step: Malloc device memory failed" in ranks
    assert "rank_1/error.log:1" in ranks and "Hint: out of memory" in ranks


def test_a_spool_with_checkpoints_and_a_nan_lists_them_with_the_poisoned_marked_and_the_goodput(tmp_path):
    from msdoctor.wire import encode, make

    run_dir = tmp_path / "run"
    (run_dir / "events").mkdir(parents=True)
    with open(run_dir / "events" / "rank-0.jsonl", "wb") as fh:
        fh.write(encode(make("run_start", 0, t=0.0, run="r")))
        for step in range(1, 101):
            loss = float("nan") if step >= 55 else 3.0 - step / 100
            fh.write(encode(make("step", 0, run="r", step=step, t=step * 0.25, loss=loss,
                                 step_time_s=0.25, data_wait_s=0.05)))
            if step % 20 == 0:
                fh.write(encode(make("checkpoint", 0, run="r", step=step, t=step * 0.25,
                                     path=f"ck/step-{step}.ckpt", save_s=0.01)))
    out = tmp_path / "r.html"
    done = subprocess.run([sys.executable, "-m", "msdoctor", "report", str(run_dir), "-o", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert "Last good checkpoint: step 40 (ck/step-40.ckpt)" in html
    rows = re.findall(r"<tr><td>0</td><td>(\d+)</td><td>(.*?)</td>", html)
    states = {int(step): re.sub(r"<[^>]+>", "", state) for step, state in rows}
    assert states == {20: "ok", 40: "last good", 60: "poisoned (LossNonFinite)",
                      80: "poisoned (LossNonFinite)", 100: "poisoned (LossNonFinite)"}
    assert "<h2>Goodput</h2>" in html and "<th>data wait</th>" in html

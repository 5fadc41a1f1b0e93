"""The report as a reader sees it: rendered by headless Chromium (Debian's ``chromium``), the
screenshot holds every panel, the points beyond the axis and the labelled alert markers; the
rendered page carries the labels, the runbook text and a true summary."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msdoctor.wire import encode, make

REPO = Path(__file__).resolve().parents[3]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                 "(scripts/bootstrap-system)")]
PANELS = ["Loss (raw, and a moving average)", "Gradient global norm", "Loss scale",
          "Throughput (tokens/s per device)", "Step time",
          "Data wait (time a step waited for its batch)", "Memory", "Learning rate"]
WIDTH, HEIGHT = 1000, 3600
T0 = 1_750_000_000.0


def write_fp32_run_ending_in_nan(run_dir: Path) -> None:
    """500 fp32 steps (loss scale fixed at 1): a loss spike to 12.1 and a gradient norm of
    20.3 at step 300, input waits at 150-200, a 2-minute stall after step 250, and a NaN loss
    from step 401 to the end (flagged as overflow by the train cell)."""
    (run_dir / "events").mkdir(parents=True)
    rng = np.random.default_rng(7)
    lines = [encode(make("run_start", 0, run="fp32", t=T0, world_size=1,
                         config={"precision": "fp32"}))]
    t = T0
    for step in range(1, 501):
        t += 120.0 if step == 251 else 0.5
        loss = 3.0 + 1.5 * math.exp(-step / 60) + 0.05 * float(rng.standard_normal())
        norm = 1.6 + 0.5 * math.sin(step / 9)
        if step == 300:
            loss, norm = 12.1, 20.3
        if step > 400:
            loss = norm = math.nan
        lines.append(encode(make(
            "step", 0, run="fp32", step=step, t=t, loss=loss, grad_norm=norm, loss_scale=1.0,
            overflow=step > 400, lr=3e-4 * min(1.0, step / 50), tokens=4096.0, step_time_s=0.5,
            data_wait_s=0.3 if 150 < step <= 200 else 0.01,
            mem_device_bytes=3 * 2**30 + step * 2**21, mem_host_rss_bytes=2**30)))
    (run_dir / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))


def report(run_dir: Path, out: Path, *argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", "msdoctor", "report", str(run_dir), "-o",
                           str(out), *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8")


def chromium(page: Path, profile: Path, *argv: str) -> str:
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--force-device-scale-factor=1",
                           f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
                           *argv, page.as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The report of the run, Chromium's DOM of it and its screenshot (pixels as RGB)."""
    from PIL import Image

    base = tmp_path_factory.mktemp("chromium")
    run_dir = base / "run"
    write_fp32_run_ending_in_nan(run_dir)
    page = base / "report.html"
    html = report(run_dir, page)
    dom = chromium(page, base / "profile", "--dump-dom")
    chromium(page, base / "profile", f"--screenshot={base / 'report.png'}")
    pixels = np.asarray(Image.open(base / "report.png").convert("RGB")).astype(np.int16)
    return run_dir, html, dom, pixels


def rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)


def plot_frames(pixels: np.ndarray) -> list:
    """(top, bottom) rows of each chart's plot area: its frame's horizontal edges, long runs
    of the frame colour (#d0d4d9, drawn crisp)."""
    frame = (np.abs(pixels - rgb("#d0d4d9")).sum(axis=2) <= 6)
    rows = [y for y in range(pixels.shape[0]) if frame[y].sum() > 700]
    edges = [y for i, y in enumerate(rows) if i == 0 or y - rows[i - 1] > 1]
    return list(zip(edges[0::2], edges[1::2]))


def test_the_screenshot_shows_every_panel_with_alert_markers_and_the_clipped_points(rendered):
    _run_dir, _html, _dom, pixels = rendered
    frames = plot_frames(pixels)
    assert len(frames) == len(PANELS), frames
    for name, (top, bottom) in zip(PANELS, frames):
        band = pixels[top - 6:bottom + 1]
        critical = (np.abs(band - rgb("#d62728")).sum(axis=2) <= 12).sum()
        assert critical >= 20, f"{name}: no critical alert marker drawn"
        drawn = (np.abs(band - 255).sum(axis=2) > 60).sum()
        assert drawn > 2000, f"{name}: an empty panel"
    for name in ("Loss (raw, and a moving average)", "Gradient global norm"):
        top, bottom = frames[PANELS.index(name)]
        clipped = (np.abs(pixels[top - 2:bottom + 2] - rgb("#b00060")).sum(axis=2) <= 12).sum()
        assert clipped >= 15, f"{name}: the point beyond the axis is not marked"


def test_the_rendered_page_labels_the_markers_and_the_points_beyond_the_axis(rendered):
    _run_dir, _html, dom, _pixels = rendered
    charts = re.findall(r'<svg[^>]*aria-label="([^"]*)"', dom)
    assert charts == PANELS
    loss = dom[dom.index('aria-label="Loss (raw'):dom.index('aria-label="Gradient global')]
    norm = dom[dom.index('aria-label="Gradient global'):dom.index('aria-label="Loss scale"')]
    assert '">12.1</text>' in loss and 'class="clipped-value"' in loss
    assert '">20.3</text>' in norm
    for chart in (loss, norm):
        labels = re.findall(r'<g class="alert-label">.*?<text[^>]*>([^<]*)</text>', chart)
        assert "LossNonFinite r0" in labels and "LossSpike r0" in labels, labels


def test_ticks_are_round_and_the_loss_scale_is_in_powers_of_two(rendered):
    _run_dir, html, _dom, _pixels = rendered

    def ylabels(title: str) -> list:
        chart = re.search(rf'aria-label="{re.escape(title)}".*?</svg>', html, flags=re.S).group(0)
        return re.findall(r'class="ylab">([^<]*)<', chart)

    def one_two_five(x: float) -> bool:
        return round(x / 10 ** math.floor(math.log10(x)), 6) in (1, 2, 5)

    def round_ticks(values: list) -> bool:
        """Evenly spaced by 1, 2 or 5 times a power of ten, or each 1, 2 or 5 times one."""
        steps = {round(b - a, 9) for a, b in zip(values, values[1:])}
        return len(values) >= 2 and (all(one_two_five(v) for v in values) or
                                     (len(steps) == 1 and one_two_five(steps.pop())))

    loss = [float(v) for v in ylabels(PANELS[0])]
    assert round_ticks(loss) and max(loss) < 12.1, loss   # the spike is beyond the axis
    norm = [float(v) for v in ylabels("Gradient global norm")]
    assert round_ticks(norm) and max(norm) < 20.3, norm
    for value in ylabels("Loss scale"):
        assert math.log2(float(value)).is_integer(), value


def test_the_summary_says_the_run_ended_non_finite_and_counts_no_overflow_in_fp32(rendered):
    _run_dir, _html, dom, _pixels = rendered
    summary = re.search(r'<div class="summary">(.*?)</div>', dom, flags=re.S).group(1)
    assert "ended non-finite from step 401 on (100 record(s)" in summary, summary
    assert "last 3." not in summary
    assert "overflow" not in re.search(r'aria-label="Loss scale[^"]*"', dom).group(0)


def test_each_fired_alert_has_its_runbook_text_inline(rendered):
    _run_dir, _html, dom, _pixels = rendered
    section = re.search(r'<section class="runbook" id="runbook-LossNonFinite">(.*?)</section>',
                        dom, flags=re.S)
    assert section and "<b>Symptom.</b> A recorded loss is NaN or ±Inf" in section.group(1)
    assert "<li>fp16 overflow in the forward pass" in section.group(1)
    assert 'href="#runbook-LossNonFinite"' in dom and "docs/runbook.md#" not in dom


def test_the_wall_clock_axis_reads_times_and_breaks_the_line_at_a_stall(rendered, tmp_path):
    import time

    run_dir, _html, _dom, _pixels = rendered
    html = report(run_dir, tmp_path / "clock.html", "--x-axis", "time")
    chart = re.search(r'aria-label="Step time".*?</svg>', html, flags=re.S).group(0)
    labels = re.findall(r'class="xlab">([^<]*)<', chart)
    start = time.strftime("%H:%M", time.localtime(T0 + 60))
    assert all(re.fullmatch(r"\d\d:\d\d", x) for x in labels) and start in labels, labels
    path = re.search(r'<path d="([^"]*)" fill="none"', chart).group(1)
    assert path.count("M") == 2                           # the 2-minute stall: a gap
    assert "wall clock (local time)" in chart

"""PNG output through matplotlib, only when it is installed (it is not a dependency)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from msdoctor.report.series import SeriesCollector, smooth
from msdoctor.report.svg import severity_colour


def write_png(result: Dict[str, Any], series: SeriesCollector, title: str, out: Path) -> None:
    """Four stacked panels (loss, grad norm, loss scale, throughput); raises ImportError
    without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("loss", "loss", False), ("grad_norm", "grad norm", True),
              ("loss_scale", "loss scale", True),
              ("tokens_per_s" if series.series("tokens_per_s") else "step_time_s", "throughput", False)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 11), sharex=True)
    for ax, (name, label, log_y) in zip(axes, panels):
        for (_run, rank), (x, y) in list(series.series(name).items())[:8]:
            ax.plot(x, y, lw=0.6, alpha=0.5 if name == "loss" else 1.0, label=f"rank {rank}")
            if name == "loss":
                ax.plot(x, smooth(y), lw=1.6)
        for a in result["alerts"]:
            if a.get("step") is not None:
                ax.axvline(a["step"], color=severity_colour(a.get("severity")), ls="--", lw=0.8)
        if log_y:
            ax.set_yscale("log")
        ax.set_ylabel(label)
    axes[0].set_title(title)
    axes[-1].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)

"""Deterministic snapshots for the TUI tests: fixed numbers, no clock."""
from __future__ import annotations

import math
from typing import Optional, Tuple

from msdoctor.tui.model import (
    AlertItem,
    ChartData,
    RankRow,
    Reading,
    RunSummary,
    by_severity,
    judge,
    worst,
)

NAN_FIX = ("Stop and resume from the last good checkpoint. Switch to bf16; make sure gradient "
           "clipping by global norm (1.0) is on; inspect the batch of this step.")
NAN_ALERT = AlertItem(
    alert="LossNonFinite", state="firing", severity="critical", run="run-a", rank=5, step=120,
    first_step=120, value=math.nan, summary="Loss is nan at step 120 on rank 5.",
    cause="fp16 overflow in the forward pass, or abnormal values in the batch.", fix=NAN_FIX,
    runbook_url="docs/runbook.md#lossnonfinite", t=1000.0)
SLOW_ALERT = AlertItem(
    alert="ThroughputBelowBaseline", state="pending", severity="warning", run="run-a", rank=3,
    step=121, first_step=110, value=9800.0,
    summary="Rank 3 runs at 9.8k tokens/s, 40% below its baseline.",
    cause="A slow data loader or a throttled device.", fix="Raise num_parallel_workers.",
    runbook_url="docs/runbook.md#throughputbelowbaseline", t=1001.0)
OLD_ALERT = AlertItem(
    alert="LossSpike", state="resolved", severity="warning", run="run-a", rank=1, step=90,
    first_step=80, value=4.2, summary="Loss spiked to 4.2 at step 80.", cause="A bad batch.",
    fix="Skip the batch.", runbook_url="docs/runbook.md#lossspike", t=900.0)


def rank_row(rank: int, step: int = 121, nan: bool = False, slow: bool = False,
             active: Tuple[AlertItem, ...] = ()) -> RankRow:
    loss = math.nan if nan else 2.0 + 0.01 * ((rank * 7) % 13)
    step_time = 0.5 * (1.6 if slow else 1.0 + 0.001 * (rank % 5))
    mine = [a for a in active if a.rank == rank]
    values = {"loss": loss, "grad_norm": 0.9 + 0.01 * (rank % 7), "loss_scale": 65536.0,
              "tokens_per_s": 8192.0 / step_time, "step_time_s": step_time,
              "data_wait_share": 0.012 * (1 + rank % 3), "mem_device_bytes": 30.5e9 + rank * 1e6,
              "update_ratio": 1.1e-3, "tokens": 8192.0}
    spark = tuple(2.6 - 0.04 * i + 0.01 * ((i * rank) % 3) for i in range(16))
    if nan:
        spark = spark[:-3] + (math.nan,) * 3
    return RankRow(rank=rank, status="running", last_step=step, age_s=1.0, values=values,
                   firing=sum(a.state == "firing" for a in mine),
                   pending=sum(a.state == "pending" for a in mine),
                   critical=sum(a.state == "firing" and a.severity == "critical" for a in mine),
                   spark=spark, alerts=by_severity(mine)[0], severities=by_severity(mine)[1])


def chart_data(ranks: Tuple[int, ...] = (5,)) -> ChartData:
    steps = list(range(1, 122))
    series = {}
    for rank in ranks:
        loss = [2.0 + 6.0 / math.sqrt(s) + 0.05 * math.sin(s * (rank + 1)) for s in steps]
        if rank == 5:
            loss[119:] = [math.nan, math.nan]
        series.setdefault("loss", {})[rank] = (steps, loss)
        series.setdefault("grad_norm", {})[rank] = (steps, [0.8 + 2 / math.sqrt(s) for s in steps])
        series.setdefault("loss_scale", {})[rank] = (steps, [65536.0 / 2 ** (s // 50)
                                                             for s in steps])
        series.setdefault("tokens_per_s", {})[rank] = (steps, [16000 + 300 * math.sin(s / 3)
                                                               for s in steps])
        series.setdefault("mem_device_bytes", {})[rank] = (steps, [30e9 + 1e7 * s for s in steps])
    return ChartData(ranks=ranks, series=series, markers=((120, "LossNonFinite", "critical"),))


def snapshot(n_ranks: int = 8, alerts: bool = True, charts: Optional[Tuple[int, ...]] = None,
             source: str = "http://127.0.0.1:9089") -> Reading:
    """A run of ``n_ranks``: rank 5 has a NaN loss (firing), rank 3 is slow (pending)."""
    active = (NAN_ALERT, SLOW_ALERT) if alerts else ()
    rows = judge([rank_row(r, nan=(r == 5), slow=(r == 3), active=active)
                  for r in range(n_ranks)])
    bad = worst(rows)
    tps = sum(r.values["tokens_per_s"] for r in rows)
    run = RunSummary(run="run-a", model="llama-tiny", world_size=n_ranks, ranks=n_ranks, step=121,
                     total_steps=1000, elapsed_s=60.5, elapsed_estimated=True, tokens_per_s=tps,
                     eta_s=439.5, firing=sum(a.state == "firing" for a in active),
                     pending=sum(a.state == "pending" for a in active),
                     statuses={"running": n_ranks}, precision="fp16",
                     worst_rank=bad.rank if bad and bad.health != "ok" else None)
    return Reading(source=source, runs=("run-a",), run=run, ranks=tuple(rows), active=active,
                    resolved=(OLD_ALERT,) if alerts else (),
                    charts=chart_data(charts) if charts else None)

"""A hung rank reads as hung everywhere: the real ``msdoctor serve`` over a spool that grows in
real time, a real Prometheus scraping it, and the TUI (Textual's pilot) over the sidecar's API.

Two ranks step every 0.5 s; then rank 0 stops stepping but keeps heartbeating (a hung
collective: the process is alive). Once max(10 s, 10 median step times) have passed, rank 0 is
stale: 0 tokens/s and out of every total (the API's overview, ``/metrics``, Prometheus'
``sum(msdoctor_device_tokens_per_second)``, the TUI header), its age keeps growing, and
``msdoctor_last_step_timestamp_seconds`` stays at its last step while heartbeats move
``msdoctor_last_event_timestamp_seconds`` on.
"""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from live_spool import LiveSpool

import servers

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(servers.PROMETHEUS is None,
                                 reason="prometheus not installed (scripts/bootstrap-system)")]

RUN = "hung-run"
TPS = 'msdoctor_device_tokens_per_second{run="hung-run"}'


def api(sidecar: servers.Server, path: str) -> dict:
    return json.loads(servers.http_get(f"{sidecar.url}/api/v1{path}"))


def samples(sidecar: servers.Server, name: str) -> dict:
    """``{rank: value}`` of one per-rank family in ``/metrics``."""
    out = {}
    for line in servers.http_get(sidecar.url + "/metrics").decode().splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            rank = labels.split('rank="')[1].split('"')[0]
            out[int(rank)] = float(value)
    return out


def prom_value(url: str, expr: str) -> float:
    result = servers.prom_query(url, expr)
    return float(result[0]["value"][1]) if result else float("nan")


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hung")
    run_dir = tmp / "run"
    run_dir.mkdir()
    spool = LiveSpool(run_dir, RUN, ranks=(0, 1))
    try:
        with servers.sidecar(run_dir, tmp) as sidecar, \
                servers.prometheus(tmp, [sidecar.url.split("//")[1]]) as prom:
            # both ranks step: Prometheus' sum counts both
            before = servers.wait_until(
                lambda: (v := prom_value(prom.url, f"sum({TPS}) / max({TPS})")) > 1.5 and v,
                60, what="both ranks' tokens/s in Prometheus")
            hung_at = spool.hang(0)
            servers.wait_until(lambda: api(sidecar, f"/runs/{RUN}/overview")["stale"] == [True, False],
                               60, what="rank 0 stale in the API")
            time.sleep(2.5)                              # a couple of scrapes after it
            yield {"sidecar": sidecar, "prom": prom, "before": before, "hung_at": hung_at,
                   "spool": spool}
    finally:
        spool.close()


def test_the_api_shows_the_hung_rank_stale_with_its_age_and_zero_tokens_per_second(hung):
    view = api(hung["sidecar"], f"/runs/{RUN}/overview")
    assert view["stale"] == [True, False]
    assert view["latest"]["tokens_per_s"][0] == 0.0 and view["latest"]["tokens_per_s"][1] > 0
    assert view["age_s"][0] >= 10.0 and view["age_s"][1] < 10.0
    assert view["totals"]["tokens_per_s"] == view["latest"]["tokens_per_s"][1]
    assert view["totals"]["stale"] == 1 and view["totals"]["running"] == 1
    assert view["latest"]["step_time_s"][0] >= 10.0          # the step in progress, so far
    rank = api(hung["sidecar"], f"/runs/{RUN}/ranks/0")
    assert rank["stale"] is True and rank["status"] == "running" and rank["age_s"] >= 10.0
    run = api(hung["sidecar"], f"/runs/{RUN}")
    assert run["stale"] == 1 and run["ended"] is None


def test_metrics_zero_the_hung_ranks_rate_and_keep_its_last_step_time(hung):
    sidecar = hung["sidecar"]
    assert samples(sidecar, "msdoctor_device_tokens_per_second")[0] == 0.0
    assert samples(sidecar, "msdoctor_device_tokens_per_second")[1] > 0.0
    assert samples(sidecar, "msdoctor_rank_stale") == {0: 1.0, 1: 0.0}
    last_step = samples(sidecar, "msdoctor_last_step_timestamp_seconds")[0]
    last_event = samples(sidecar, "msdoctor_last_event_timestamp_seconds")[0]
    assert last_step < hung["hung_at"] < last_event             # heartbeats, not steps


def test_prometheus_sums_only_the_rank_that_still_steps(hung):
    url = hung["prom"].url
    assert hung["before"] > 1.5                                 # both counted before the hang
    assert prom_value(url, f'{TPS[:-1]},rank="0"}}') == 0.0
    assert prom_value(url, f"sum({TPS}) / max({TPS})") == 1.0   # rank 1 alone
    assert prom_value(url, 'msdoctor_rank_stale{rank="0"}') == 1.0


def test_the_tui_greys_the_hung_rank_shows_its_age_and_leaves_it_out_of_the_total(hung):
    asyncio.run(_tui_checks(hung["sidecar"].url))


async def _tui_checks(url: str) -> None:
    from msdoctor.core import format as fmt
    from msdoctor.tui.app import DoctorApp
    from msdoctor.tui.columns import BY_KEY
    from msdoctor.tui.ranktable import STALE_STYLE, RankTable
    from msdoctor.tui.source import HttpSource

    app = DoctorApp(HttpSource(url), poll=False)
    async with app.run_test(size=(140, 30)):
        assert await app.refresh_data()
        table = app.query_one(RankTable)
        rows = {r.rank: r for r in table.rows}
        assert rows[0].stale and rows[0].health == "stale" and not rows[1].stale
        assert rows[0].values["tokens_per_s"] == 0.0
        assert BY_KEY["age"].cell(rows[0]).strip().endswith("s")
        assert rows[0].age_s >= 10.0 > rows[1].age_s
        header = str(app.query_one("#run-header").render())
        assert f"tok/s {fmt.rate(rows[1].values['tokens_per_s'])}" in header
        cells = cell_styles(table, rows[0])
        for key in ("tokens_per_s", "step_time_s", "loss"):
            assert cells[key].color == STALE_STYLE.color, key
        assert cell_styles(table, rows[1])["tokens_per_s"].color != STALE_STYLE.color


def cell_styles(table, row) -> dict:
    """The style of each shown column's cell in the rank's drawn line (a segment may cover
    several cells of one style)."""
    per_char = [seg.style for seg in table._row(row, cursor=False) for _ in seg.text]
    out, x = {}, 0
    for column, width in table.shown:
        out[column.key] = per_char[x]
        x += width
    return out

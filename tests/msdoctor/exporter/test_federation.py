"""A fleet seen through Prometheus federation: one sidecar per node, one Prometheus per
group of nodes, a global Prometheus that federates the msdoctor series of both and
evaluates the fleet rules over the whole job (docs/prometheus.md, "Beyond one Prometheus").

Node A holds ranks 0-1 of a 4-rank run, node B ranks 2-3, both of them stepping twice as
slow. Each node's sidecar is scraped by its own Prometheus (``group`` a and b); neither sees
the other half of the run: within group b the two slow ranks are the median, and each group
counts 2 of the 4 ranks. Only the global one sees the stragglers and the whole run.
"""
from __future__ import annotations

import time

import pytest

from grafana.mixin import alerts
from grafana.mixin.render import render_rules

import servers
from spool_factory import write_run

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(servers.PROMETHEUS is None,
                                 reason="prometheus not installed (scripts/bootstrap-system)")]

RUN = "federated-run"


def host(server: servers.Server) -> str:
    return server.url.split("//")[1]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("federation")
    node_a, node_b = tmp / "node-a", tmp / "node-b"
    # stamped ahead of the clock, so no rank goes stale while the module runs (a spool that
    # stops growing reads as a hung fleet, and stale ranks leave the straggler comparison)
    t0 = time.time() + 300.0
    write_run(node_a, run=RUN, ranks=(0, 1), world_size=4, steps=40, t0=t0)
    for rank in (2, 3):
        write_run(node_b, run=RUN, ranks=(rank,), world_size=4, steps=40, slow_rank=rank,
                  slow=2.0, t0=t0)
    rules = tmp / "fleet.rules.yml"
    rules.write_text(render_rules(alerts.fast_params()))
    with servers.sidecar(node_a, tmp) as a, servers.sidecar(node_b, tmp) as b, \
            servers.prometheus(tmp, [host(a)], external_labels={"group": "a"}) as leaf_a, \
            servers.prometheus(tmp, [host(b)], external_labels={"group": "b"}) as leaf_b, \
            servers.prometheus(tmp, [], [rules], federate=[host(leaf_a), host(leaf_b)]) as top:
        servers.wait_until(
            lambda: len(servers.prom_query(top.url, 'count by (rank) (msdoctor_last_step)')) == 4,
            60, what="the global Prometheus federating the 4 ranks of both groups")
        yield {"a": leaf_a, "b": leaf_b, "top": top}


def test_each_group_prometheus_sees_only_its_own_node(fleet):
    for name, ranks in (("a", {"0", "1"}), ("b", {"2", "3"})):
        series = servers.prom_query(fleet[name].url, f'msdoctor_last_step{{run="{RUN}"}}')
        assert {s["metric"]["rank"] for s in series} == ranks


def test_the_global_prometheus_holds_both_groups_with_their_original_labels(fleet):
    series = servers.prom_query(fleet["top"].url, f'msdoctor_last_step{{run="{RUN}"}}')
    by_rank = {s["metric"]["rank"]: s["metric"] for s in series}
    assert sorted(by_rank) == ["0", "1", "2", "3"]
    assert {by_rank[r]["group"] for r in ("0", "1")} == {"a"}
    assert {by_rank[r]["group"] for r in ("2", "3")} == {"b"}
    assert all(m["job"] == "msdoctor" for m in by_rank.values())   # honor_labels


def test_the_fleet_rules_on_the_global_prometheus_judge_ranks_of_both_groups(fleet):
    top = fleet["top"].url
    firing = servers.wait_until(
        lambda: len(servers.prom_alerts(top, "MsdoctorStragglerRank")) == 2 and
        servers.prom_alerts(top, "MsdoctorStragglerRank"), 60,
        what="MsdoctorStragglerRank firing on the global Prometheus")
    assert sorted((a["labels"]["run"], a["labels"]["rank"]) for a in firing) == \
        [(RUN, "2"), (RUN, "3")]
    assert not servers.prom_alerts(top, "MsdoctorRankMissing")     # 4 of 4 ranks, 2 groups
    assert not servers.prom_alerts(top, "MsdoctorSidecarDown")


def test_a_group_prometheus_alone_would_miss_the_stragglers_and_count_ranks_missing(fleet):
    rules = {r["alert"]: r["expr"] for r in alerts.alerting_rules(alerts.fast_params())}
    straggler, missing = rules["MsdoctorStragglerRank"], rules["MsdoctorRankMissing"]
    for name in ("a", "b"):       # the fleet rules' expressions on one group's Prometheus
        assert [float(s["value"][1]) for s in servers.prom_query(fleet[name].url, missing)] \
            == [2.0]
        assert servers.prom_query(fleet[name].url, straggler) == []
    assert servers.prom_query(fleet["top"].url, missing) == []

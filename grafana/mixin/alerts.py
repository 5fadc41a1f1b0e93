"""Prometheus alerting rules for what only the fleet view can see.

A sidecar sees the ranks of its own node; these rules run in the Prometheus
that scrapes every sidecar: a sidecar that went down, ranks missing from the
run, a straggler rank (step time vs the fleet median) and fleet throughput
below the run's baseline. Thresholds and windows are parameters so the tests
can build a fast copy; the shipped file uses :data:`DEFAULTS`.

They share the sidecar's notion of a live rank (``msdoctor.core.liveness``): a rank counts
while ``msdoctor_rank_running == 1`` (no run_end, not gone for good); a stale one
(``msdoctor_rank_stale == 1``) reports 0 tokens/s, so it drops out of the fleet sum; and
every alert is gated on its run (or rank) still running, so none outlives the run.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List

from msdoctor.exporter import names

RUNBOOK = "docs/prometheus.md#"


@dataclass(frozen=True)
class Params:
    """Windows, `for` durations and thresholds of the fleet rules."""

    sidecar_down_for: str = "2m"
    sidecar_memory: str = "1h"           # how long a scraped sidecar is remembered
    rank_missing_for: str = "2m"
    straggler_window: str = "5m"
    straggler_ratio: float = 1.25        # step time / fleet median
    straggler_min_ranks: int = 2
    straggler_for: str = "10m"
    throughput_ratio: float = 0.8        # fleet tokens/s / expected
    throughput_for: str = "10m"
    drop_ratio: float = 0.7              # fleet tokens/s / its own median of the past hour
    drop_window: str = "1h"
    drop_offset: str = "10m"
    drop_for: str = "10m"
    evaluation_interval: str = "30s"


DEFAULTS = Params()


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, cause: str,
           fix: str) -> Dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, "source": "msdoctor-fleet"},
        "annotations": {"summary": summary, "cause": cause, "fix": fix,
                        "runbook_url": RUNBOOK + name.lower()},
    }


def _fleet_tokens() -> str:
    return "msdoctor:fleet_device_tokens_per_second:sum"


def _running_rank() -> str:
    """``and on (run, rank)`` filter: the rank is running (its run has not ended)."""
    return f"and on (run, rank) {names.RUNNING.name} == 1"


def _running_run() -> str:
    """``and on (run)`` filter: at least one rank of the run is running."""
    return f"and on (run) max by (run) ({names.RUNNING.name}) == 1"


def recording_rules() -> List[Dict[str, Any]]:
    """Series the alerts below (and dashboards) reuse."""
    tps = names.by_source("tokens_per_s").name
    return [{"record": _fleet_tokens(), "expr": f"sum by (run) ({tps})"}]


def alerting_rules(p: Params = DEFAULTS) -> List[Dict[str, Any]]:
    """The fleet alerts, in the msdoctor annotation style (summary, cause, fix, runbook)."""
    build = names.BUILD.sample_name
    world = names.RUN_WORLD_SIZE.name
    last_step = names.LAST_STEP.name
    step_time = names.by_source("step_time_s").name
    expected = names.RUN_EXPECTED_TOKENS.name
    running, stale = names.RUNNING.name, names.STALE.name
    avg_step = (f"(avg_over_time({step_time}[{p.straggler_window}]) "
                f"and on (run, rank) {stale} == 0)")
    return [
        _alert("MsdoctorSidecarDown",
               f"up == 0 and on (job, instance) max_over_time({build}[{p.sidecar_memory}])",
               p.sidecar_down_for, "critical",
               "msdoctor sidecar {{ $labels.instance }} has not answered Prometheus for "
               f"{p.sidecar_down_for}.",
               "The node is down or unreachable, or the sidecar process exited.",
               "Check the node and restart `msdoctor serve` there; it resumes from its saved "
               "offsets without losing events. The node's ranks are not being watched until "
               "then."),
        _alert("MsdoctorRankMissing",
               f"(max by (run) ({world}) - count by (run) ({last_step}) > 0)\n{_running_run()}",
               p.rank_missing_for, "critical",
               "{{ $value }} rank(s) of run {{ $labels.run }} are not reported by any sidecar.",
               "A rank never started, its spool is not where a sidecar looks, or the sidecar of "
               "its node is down.",
               "Check that every node runs a sidecar over the run directory "
               "(`msdoctor serve --run-dir`) and that Prometheus scrapes them all; look for "
               "failed ranks in the launcher's logs."),
        _alert("MsdoctorStragglerRank",
               f"(\n  {avg_step}\n  / on (run) group_left ()\n"
               f"  quantile by (run) (0.5, {avg_step})\n) > {p.straggler_ratio:g}\n"
               f"{_running_rank()}\n"
               f"and on (run) count by (run) ({running} == 1) >= {p.straggler_min_ranks}",
               p.straggler_for, "warning",
               "Rank {{ $labels.rank }} of run {{ $labels.run }} steps {{ $value | printf "
               "\"%.2f\" }}x slower than the fleet median.",
               "One device or host is slower: thermal throttling, a noisy neighbour, a slow "
               "data loader on that node, or a degraded link.",
               "Compare the rank's data-wait share and host metrics with its peers in the rank "
               "drill-down; drain or replace the node if the hardware is degraded."),
        _alert("MsdoctorFleetThroughputBelowExpected",
               f"{_fleet_tokens()}\n  / on (run) (max by (run) ({expected}) * max by (run) ({world}))"
               f"\n< {p.throughput_ratio:g}\n{_running_run()}",
               p.throughput_for, "warning",
               "Run {{ $labels.run }} processes {{ $value | humanizePercentage }} of its "
               "expected tokens/s.",
               "Missing or slow ranks, input-pipeline stalls, or a configuration that differs "
               "from the baseline's.",
               "Look for stragglers and data-wait share on the fleet dashboard; compare the "
               "run's config with the baseline's."),
        _alert("MsdoctorFleetThroughputDropped",
               f"{_fleet_tokens()}\n< {p.drop_ratio:g} * quantile_over_time(0.5, "
               f"{_fleet_tokens()}[{p.drop_window}] offset {p.drop_offset})\n{_running_run()}",
               p.drop_for, "warning",
               "Run {{ $labels.run }}'s throughput fell below "
               f"{p.drop_ratio:.0%} of its median over the previous {p.drop_window}.",
               "Something changed mid-run: a rank slowed down or left, storage or network "
               "became slower, or evaluation/checkpointing now runs more often.",
               "Find when it started on the fleet dashboard and correlate with alerts, "
               "checkpoints and straggler ranks."),
    ]


def rule_file(p: Params = DEFAULTS) -> Dict[str, Any]:
    """A complete Prometheus rule file (``rule_files:`` entry)."""
    return {"groups": [
        {"name": "msdoctor-fleet-recording", "interval": p.evaluation_interval,
         "rules": recording_rules()},
        {"name": "msdoctor-fleet", "interval": p.evaluation_interval,
         "rules": alerting_rules(p)},
    ]}


def fast_params(**overrides: Any) -> Params:
    """Parameters for tests against a real Prometheus: seconds instead of minutes."""
    fast = replace(DEFAULTS, sidecar_down_for="0s", rank_missing_for="0s",
                   straggler_window="10s", straggler_for="0s", throughput_for="0s",
                   drop_for="0s", evaluation_interval="1s")
    return replace(fast, **overrides)

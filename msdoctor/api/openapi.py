"""OpenAPI 3.0 description of ``/api/v1`` (served at ``/api/v1/openapi.json``).

``docs/api.openapi.json`` is this document, committed; a test checks they match
and that real responses validate against the component schemas' required keys.
"""
from __future__ import annotations

from typing import Any, Dict

from msdoctor import __version__

NUMBER = {"oneOf": [{"type": "number"}, {"type": "string", "enum": ["nan", "inf", "-inf"]}],
          "description": "A number; non-finite values are the strings nan, inf, -inf."}
COUNTS = {"type": "object", "required": ["firing", "pending"],
          "properties": {"firing": {"type": "integer"}, "pending": {"type": "integer"}}}


def _ref(name: str) -> Dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list, properties: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties, **extra}


SCHEMAS: Dict[str, Any] = {
    "Error": _obj(["error"], {"error": {"type": "string"}}),
    "Status": _obj(["version", "run_dir", "uptime_s", "runs", "ranks", "alerts", "delivery"], {
        "version": {"type": "string"}, "run_dir": {"type": "string"},
        "uptime_s": {"type": "number"}, "runs": {"type": "integer"},
        "ranks": {"type": "integer"}, "alerts": COUNTS,
        "delivery": {"type": "array", "items": _obj(["receiver", "sent", "failed", "dropped"], {
            "receiver": {"type": "string"}, "sent": {"type": "integer"},
            "failed": {"type": "integer"}, "dropped": {"type": "integer"},
            "queued": {"type": "integer"}, "healthy": {"type": "boolean"}})},
        "ingest": _obj(["max_runs", "runs", "refused_events", "refused_run_starts"], {
            "max_runs": {"type": "integer"}, "runs": {"type": "integer"},
            "refused_events": {"type": "integer"}, "refused_run_starts": {"type": "integer"}},
            description="the bound on run ids kept (--max-runs) and the events refused "
                        "beyond it")}),
    "Run": _obj(["run", "world_size", "config", "expect", "ranks", "status", "last_step",
                 "alerts"], {
        "run": {"type": "string"}, "world_size": {"type": "integer", "nullable": True},
        "config": {"type": "object", "description": "run_start.config of the lowest rank"},
        "expect": {"type": "object", "description": "run_start.expect (baselines)"},
        "ranks": {"type": "integer"},
        "status": {"type": "object", "additionalProperties": {"type": "integer"},
                   "description": "rank count per status (running, completed, failed, stopped, "
                                  "gone)"},
        "last_step": {"type": "object", "nullable": True,
                      "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}}},
        "alerts": COUNTS,
        "stale": {"type": "integer", "description": "running ranks with no step for max(10 s, "
                  "10 median step times)"},
        "ended": _obj(["outcome", "t", "statuses"], {
            "outcome": {"type": "string", "enum": ["ok", "failed"]},
            "t": {"type": "number", "nullable": True},
            "statuses": {"type": "object", "additionalProperties": {"type": "integer"}}},
            description="null while a rank runs; how and when every rank ended (run_end, or "
                        "gone for good)", nullable=True)}),
    "Rank": _obj(["run", "rank", "status", "last_step", "t", "age_s", "latest", "counters",
                  "alerts"], {
        "run": {"type": "string"}, "rank": {"type": "integer"},
        "status": {"type": "string",
                   "enum": ["running", "completed", "failed", "stopped", "gone"]},
        "last_step": {"type": "integer", "nullable": True},
        "t": {"type": "number", "nullable": True, "description": "wall time of the newest event"},
        "age_s": {"type": "number", "nullable": True,
                  "description": "seconds since the rank's last step event"},
        "stale": {"type": "boolean"},
        "latest": {"type": "object", "additionalProperties": NUMBER,
                   "description": "latest value per signal (loss, grad_norm, tokens_per_s, ...); "
                                  "rates as of now: 0 tokens/s on a stale or ended rank"},
        "counters": {"type": "object", "additionalProperties": {"type": "integer"}},
        "alerts": COUNTS,
        "run_end": {"type": "object", "nullable": True}, "checkpoint": {"type": "object",
                                                                        "nullable": True},
        "stop": {"type": "object", "nullable": True},
        "signals": {"type": "array", "items": {"type": "string"}},
        "active_alerts": {"type": "array", "items": _ref("Alert")}}),
    "Series": _obj(["steps", "values", "points", "downsampled"], {
        "steps": {"type": "array", "items": {"type": "integer"}},
        "values": {"type": "array", "items": NUMBER},
        "points": {"type": "integer", "description": "points since `since` before downsampling"},
        "downsampled": {"type": "boolean"}}),
    "RankSeries": _obj(["run", "rank", "since", "last_step", "series"], {
        "run": {"type": "string"}, "rank": {"type": "integer"}, "since": {"type": "integer"},
        "last_step": {"type": "integer", "nullable": True},
        "series": {"type": "object", "additionalProperties": _ref("Series")}}),
    "RunSeries": _obj(["run", "signal", "since", "ranks"], {
        "run": {"type": "string"}, "signal": {"type": "string"}, "since": {"type": "integer"},
        "ranks": {"type": "object", "additionalProperties": _ref("Series"),
                  "description": "rank number (as a string) -> series"}}),
    "Overview": _obj(["run", "ranks", "status", "last_step", "age_s", "latest", "alerts",
                      "alerts_version"], {
        "run": {"type": "string"},
        "ranks": {"type": "array", "items": {"type": "integer"},
                  "description": "rank numbers, ascending; every other array is aligned to it"},
        "status": {"type": "array", "items": {"type": "string"}},
        "last_step": {"type": "array", "items": {"type": "integer", "nullable": True}},
        "age_s": {"type": "array", "items": {"type": "number", "nullable": True}},
        "latest": {"type": "object", "additionalProperties": {
            "type": "array", "items": {**NUMBER, "nullable": True}},
            "description": "signal -> latest value per rank (null: never recorded)"},
        "alerts": _obj(["firing", "pending"], {
            "firing": {"type": "array", "items": {"type": "integer"}},
            "pending": {"type": "array", "items": {"type": "integer"}}}),
        "alerts_version": {"type": "string", "description": "changes whenever the active "
                           "alerts or the alert history change"},
        "spark": _obj(["signal", "points", "values"], {
            "signal": {"type": "string"}, "points": {"type": "integer"},
            "values": {"type": "array", "items": {"type": "array", "items": NUMBER}}},
            description="the last `points` values of `signal` per rank (when `spark` is given)"),
        "stale": {"type": "array", "items": {"type": "boolean"}},
        "totals": {"type": "object", "additionalProperties": {"type": "number"},
                   "description": "tokens_per_s summed over the live ranks; running and stale "
                                  "rank counts"}}),
    "Alert": _obj(["alert", "state", "severity", "run", "rank", "step", "first_step", "value",
                   "summary", "cause", "fix", "runbook_url", "t"], {
        "alert": {"type": "string"}, "state": {"type": "string",
                                               "enum": ["pending", "firing", "resolved",
                                                        "inactive"]},
        "severity": {"type": "string", "enum": ["info", "warning", "critical"]},
        "run": {"type": "string"}, "rank": {"type": "integer", "nullable": True},
        "step": {"type": "integer", "nullable": True},
        "first_step": {"type": "integer", "nullable": True}, "value": NUMBER,
        "summary": {"type": "string"}, "cause": {"type": "string", "nullable": True},
        "fix": {"type": "string", "nullable": True},
        "runbook_url": {"type": "string", "nullable": True},
        "t": {"type": "number", "nullable": True},
        "active_since": {"type": "number", "nullable": True},
        "caused_by": {"type": "string", "nullable": True,
                      "description": "the alert firing on the same rank that this one is a "
                                     "consequence of (rules' consequence_of); such an alert is "
                                     "not notified on its own"},
        "reason": {"type": "string", "nullable": True,
                   "description": "why it ended other than by its condition ('run ended')"},
        "extra": {"type": "object", "description": "the transition's other fields, e.g. "
                  "`checkpoint`: for a rule whose fix names it, the last checkpoint saved "
                  "before the anomaly began (step, path, ...), null when none is known"}}),
    "Checkpoint": _obj(["rank", "step", "path", "poisoned_by", "last_good"], {
        "rank": {"type": "integer"}, "step": {"type": "integer"},
        "path": {"type": "string", "nullable": True}, "t": {"type": "number", "nullable": True},
        "size_bytes": {"type": "integer", "nullable": True},
        "save_s": {**NUMBER, "nullable": True},
        "poisoned_by": {"type": "string", "nullable": True,
                        "description": "the alert whose anomaly this checkpoint was saved during"},
        "last_good": {"type": "boolean",
                      "description": "an alert named it as the checkpoint to resume from"}}),
    "Goodput": _obj(["run", "wall_s", "productive_s", "ratio", "badput_s"], {
        "run": {"type": "string"}, "wall_s": {"type": "number"},
        "productive_s": {"type": "number"}, "ratio": {"type": "number", "nullable": True},
        "badput_s": {"type": "object", "additionalProperties": {"type": "number"},
                     "description": "seconds lost by cause: startup, data_wait, checkpoint, "
                                    "hang, downtime, redone, evaluation, other"}}),
    "Layers": _obj(["run", "rank", "names", "steps", "signals", "marks"], {
        "run": {"type": "string"}, "rank": {"type": "integer"},
        "names": {"type": "array", "items": {"type": "string"},
                  "description": "layer names in forward order"},
        "steps": {"type": "array", "items": {"type": "integer"}},
        "signals": {"type": "object", "description": "grad_norm, act_max, weight_norm, "
                    "update_ratio: one row per step, one entry per layer (null: not measured)",
                    "additionalProperties": {"type": "array", "items": {
                        "type": "array", "items": {**NUMBER, "nullable": True}}}},
        "marks": {"type": "array", "items": _obj(["alert", "state", "layers", "first_step"], {
            "alert": {"type": "string"}, "state": {"type": "string"},
            "layers": {"type": "array", "items": {"type": "string"}},
            "first_step": {"type": "integer", "nullable": True},
            "first_rank": {"type": "integer", "nullable": True}}),
            "description": "this rank's alerts that named a layer (label `layer`)"}}),
    "CheckpointList": _obj(["run", "checkpoints"], {
        "run": {"type": "string"}, "checkpoints": {"type": "array", "items": _ref("Checkpoint")}}),
    "RunList": _obj(["runs"], {"runs": {"type": "array", "items": _ref("Run")}}),
    "RankList": _obj(["run", "ranks"], {"run": {"type": "string"},
                                        "ranks": {"type": "array", "items": _ref("Rank")}}),
    "AlertList": _obj(["alerts"], {"alerts": {"type": "array", "items": _ref("Alert")}}),
    "TransitionList": _obj(["transitions"], {"transitions": {"type": "array",
                                                             "items": _ref("Alert")}}),
}


def _get(summary: str, schema: str, params: list = ()) -> Dict[str, Any]:
    return {"get": {"summary": summary, "parameters": list(params), "responses": {
        "200": {"description": "OK", "content": {"application/json": {"schema": _ref(schema)}}},
        "400": {"description": "Bad parameter",
                "content": {"application/json": {"schema": _ref("Error")}}},
        "404": {"description": "Unknown run, rank or signal",
                "content": {"application/json": {"schema": _ref("Error")}}}}}}


def _param(name: str, where: str, schema: Dict[str, Any], description: str,
           required: bool = False) -> Dict[str, Any]:
    return {"name": name, "in": where, "required": required or where == "path",
            "schema": schema, "description": description}


RUN = _param("run", "path", {"type": "string"}, "run id")
RANK = _param("rank", "path", {"type": "integer", "minimum": 0}, "rank number")
SINCE = _param("since", "query", {"type": "integer", "default": 0},
               "only points with step >= since (poll with the last step you have + 1)")
MAX_POINTS = _param("max_points", "query", {"type": "integer", "minimum": 1, "maximum": 100000},
                    "downsample to at most this many points (min/max per bucket; NaNs kept)")
SIGNAL = _param("signal", "query", {"type": "string"},
                "signal name; repeat or comma-separate for several (default: all); each name "
                "counts once, at most 64 distinct names")


def openapi() -> Dict[str, Any]:
    """The OpenAPI document."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "msdoctor sidecar API", "version": __version__,
                 "description": "Read-only JSON over the sidecar's state for the TUI and "
                                "scripts. Only GET and HEAD; other methods get 405. With "
                                "--api-token, send `Authorization: Bearer <token>`."},
        "paths": {
            "/api/v1/status": _get("Sidecar status: runs, ranks, alert counts, delivery",
                                   "Status"),
            "/api/v1/runs": _get("Every run with its rank count, step range and alerts",
                                 "RunList"),
            "/api/v1/runs/{run}": _get("One run", "Run", [RUN]),
            "/api/v1/runs/{run}/ranks": _get("Every rank of a run with latest values", "RankList",
                                             [RUN]),
            "/api/v1/runs/{run}/ranks/{rank}": _get("One rank, with its active alerts", "Rank",
                                                    [RUN, RANK]),
            "/api/v1/runs/{run}/ranks/{rank}/series": _get(
                "Step series of one rank since a step", "RankSeries",
                [RUN, RANK, SIGNAL, SINCE, MAX_POINTS]),
            "/api/v1/runs/{run}/ranks/{rank}/layers": _get(
                "Per-layer signals of one rank over its recent steps, and the layers its alerts "
                "named", "Layers",
                [RUN, RANK, SINCE, _param("max_steps", "query", {"type": "integer", "minimum": 1,
                                                                 "maximum": 512, "default": 120},
                                          "the newest this many steps")]),
            "/api/v1/runs/{run}/series": _get(
                "One signal of every rank of a run since a step", "RunSeries",
                [RUN, {**SIGNAL, "required": True,
                       "description": "signal name (exactly one)"}, SINCE, MAX_POINTS]),
            "/api/v1/runs/{run}/overview": _get(
                "Every rank of a run in parallel arrays: status, latest values, alert counts, "
                "a sparkline", "Overview",
                [RUN, {**SIGNAL, "description": "signals for `latest`; repeat or comma-separate "
                       "(default: all)"},
                 _param("spark", "query", {"type": "string"},
                        "signal whose last points per rank to add as `spark`"),
                 _param("spark_points", "query", {"type": "integer", "minimum": 0,
                                                  "maximum": 256, "default": 16},
                        "how many last points per rank for `spark`")]),
            "/api/v1/runs/{run}/checkpoints": _get(
                "The checkpoints of a run, poisoned ones and the last good one marked",
                "CheckpointList", [RUN]),
            "/api/v1/runs/{run}/goodput": _get(
                "Productive time over wall time of a run, and the badput by cause", "Goodput",
                [RUN]),
            "/api/v1/alerts": _get("Active alerts with summary, cause and fix", "AlertList", [
                _param("state", "query", {"type": "string", "enum": ["active", "firing",
                                                                     "pending"],
                                          "default": "active"}, "which active alerts"),
                _param("run", "query", {"type": "string"}, "only this run"),
                _param("rank", "query", {"type": "integer"}, "only this rank")]),
            "/api/v1/alerts/history": _get("Recent alert transitions, oldest first", "TransitionList", [
                _param("limit", "query", {"type": "integer", "minimum": 1, "maximum": 1000,
                                          "default": 100}, "newest N transitions"),
                _param("run", "query", {"type": "string"}, "only this run")]),
            "/api/v1/openapi.json": {"get": {"summary": "This document", "responses": {
                "200": {"description": "OpenAPI 3.0 JSON"}}}},
        },
        "components": {"schemas": SCHEMAS},
    }

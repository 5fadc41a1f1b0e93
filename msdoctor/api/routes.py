"""The ``/api/v1`` route table: path + query string in, ``(status, JSON body)`` out.

Independent of the HTTP server (``msdoctor.http.server`` calls
:meth:`Api.handle`), so it is tested without sockets. Each route reads one view of
:mod:`msdoctor.core.views` and sends its ``to_json()``. Every route is read-only;
bad parameters get a 400 naming the parameter, what was given and what is
expected; unknown runs, ranks and signals get a 404 listing what exists.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, Union
from urllib.parse import parse_qs, unquote

from msdoctor.api.openapi import openapi
from msdoctor.core import views
from msdoctor.core.state import Store
from msdoctor.core.views import AlertSource, layer_views
from msdoctor.wire.errors import MsdoctorError

PREFIX = "/api/v1"
ALERT_STATES = ("active", "firing", "pending")
#: Distinct signal names one request may ask for (a rank records about twenty).
MAX_SIGNALS = 64

Response = Tuple[int, Dict[str, Any]]


class View(Protocol):
    """What a route answers with: a view of :mod:`msdoctor.core.views`."""

    def to_json(self) -> Dict[str, Any]: ...


Handler = Callable[..., Union[View, Dict[str, Any]]]


class BadRequest(MsdoctorError, ValueError):
    """A query parameter with the wrong form."""


@dataclass
class Context:
    """What the API reads: the store, the alert feed, the deliverers, and some facts."""

    store: Store
    feed: Optional[AlertSource] = None
    deliverers: Sequence[views.Deliverer] = ()
    run_dir: str = ""
    started: float = field(default_factory=time.time)


def _one(query: Dict[str, List[str]], name: str) -> Optional[str]:
    values = query.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise BadRequest(f"query parameter {name!r} given {len(values)} times; expected once")
    return values[0]


def _int(query: Dict[str, List[str]], name: str, default: Optional[int], low: int,
         high: Optional[int] = None) -> Optional[int]:
    text = _one(query, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"query parameter {name!r}: expected an integer, got {text!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise BadRequest(f"query parameter {name!r}: expected an integer {bound}, got {value}")
    return value


def _signals(query: Dict[str, List[str]]) -> List[str]:
    """The signal names asked for, each once, in the order given; at most
    :data:`MAX_SIGNALS` distinct names (a longer list gets a 400 before any work)."""
    out: Dict[str, None] = {}
    for value in query.get("signal", []) + query.get("signals", []):
        for name in value.split(","):
            if name and name not in out:
                if len(out) >= MAX_SIGNALS:
                    raise BadRequest(f"query parameter 'signal': more than {MAX_SIGNALS} "
                                     f"distinct signal names; expected at most {MAX_SIGNALS}")
                out[name] = None
    return list(out)


def _rank(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"rank in the path: expected an integer, got {text!r}") from None
    if value < 0:
        raise BadRequest(f"rank in the path: expected an integer >= 0, got {value}")
    return value


class Api:
    """Dispatch ``GET /api/v1/...`` requests to :mod:`msdoctor.core.views`."""

    def __init__(self, context: Context) -> None:
        self.ctx = context
        seg = r"([^/]+)"
        self.routes: List[Tuple[re.Pattern, Handler]] = [
            (re.compile(r"/?"), self._index),
            (re.compile(r"/openapi\.json"), lambda q: openapi()),
            (re.compile(r"/status"), self._status),
            (re.compile(r"/runs"), self._runs),
            (re.compile(rf"/runs/{seg}"), self._run),
            (re.compile(rf"/runs/{seg}/ranks"), self._ranks),
            (re.compile(rf"/runs/{seg}/ranks/{seg}"), self._rank),
            (re.compile(rf"/runs/{seg}/ranks/{seg}/series"), self._rank_series),
            (re.compile(rf"/runs/{seg}/ranks/{seg}/layers"), self._layers),
            (re.compile(rf"/runs/{seg}/series"), self._run_series),
            (re.compile(rf"/runs/{seg}/overview"), self._overview),
            (re.compile(rf"/runs/{seg}/checkpoints"), self._checkpoints),
            (re.compile(rf"/runs/{seg}/goodput"), self._goodput),
            (re.compile(r"/alerts"), self._alerts),
            (re.compile(r"/alerts/history"), self._history),
        ]

    def handle(self, path: str, query_string: str = "") -> Response:
        """Answer one GET: ``path`` starts with ``/api/v1``."""
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            return 404, {"error": f"no such endpoint {path!r}; the API lives under {PREFIX}/"}
        rest = path[len(PREFIX):]
        query = parse_qs(query_string, keep_blank_values=True)
        for pattern, handler in self.routes:
            match = pattern.fullmatch(rest)
            if match is None:
                continue
            try:
                body = handler(query, *[unquote(g) for g in match.groups()])
                return 200, body if isinstance(body, dict) else body.to_json()
            except BadRequest as exc:
                return 400, {"error": str(exc)}
            except views.NotFound as exc:
                return 404, {"error": str(exc)}
        return 404, {"error": f"no such endpoint {path!r}; see {PREFIX}/ for the list"}

    # -- handlers ---------------------------------------------------------------
    def _index(self, query: Dict[str, List[str]]) -> Dict[str, Any]:
        return {"api": "msdoctor", "version": 1, "endpoints": sorted(openapi()["paths"])}

    def _status(self, query: Dict[str, List[str]]) -> views.StatusView:
        c = self.ctx
        return views.status(c.store, c.feed, c.deliverers, c.started, c.run_dir)

    def _runs(self, query: Dict[str, List[str]]) -> views.RunsView:
        return views.runs(self.ctx.store, self.ctx.feed)

    def _run(self, query: Dict[str, List[str]], run: str) -> views.RunView:
        return views.run(self.ctx.store, self.ctx.feed, run)

    def _ranks(self, query: Dict[str, List[str]], run: str) -> views.RanksView:
        return views.ranks(self.ctx.store, self.ctx.feed, run)

    def _rank(self, query: Dict[str, List[str]], run: str, rank: str) -> views.RankView:
        return views.rank(self.ctx.store, self.ctx.feed, run, _rank(rank))

    def _window(self, query: Dict[str, List[str]]) -> Tuple[int, Optional[int]]:
        since = _int(query, "since", 0, -(2**62))
        max_points = _int(query, "max_points", None, 1, views.MAX_POINTS_LIMIT)
        return since, max_points

    def _rank_series(self, query: Dict[str, List[str]], run: str,
                     rank: str) -> views.RankSeriesView:
        since, max_points = self._window(query)
        return views.rank_series(self.ctx.store, run, _rank(rank), _signals(query), since,
                                 max_points)

    def _layers(self, query: Dict[str, List[str]], run: str, rank: str) -> views.LayersView:
        since = _int(query, "since", 0, -(2**62))
        steps = _int(query, "max_steps", layer_views.DEFAULT_STEPS, 1, layer_views.MAX_STEPS)
        return views.layers(self.ctx.store, self.ctx.feed, run, _rank(rank), since or 0,
                            steps or layer_views.DEFAULT_STEPS)

    def _run_series(self, query: Dict[str, List[str]], run: str) -> views.RunSeriesView:
        signals = _signals(query)
        if len(signals) != 1:
            raise BadRequest(f"query parameter 'signal': expected exactly one signal name, "
                             f"got {len(signals)}")
        since, max_points = self._window(query)
        return views.run_series(self.ctx.store, run, signals[0], since, max_points)

    def _overview(self, query: Dict[str, List[str]], run: str) -> views.OverviewView:
        spark = _one(query, "spark")
        points = _int(query, "spark_points", 16, 0, views.MAX_SPARK_POINTS)
        return views.overview(self.ctx.store, self.ctx.feed, run, _signals(query), spark or None,
                              points)

    def _checkpoints(self, query: Dict[str, List[str]], run: str) -> views.CheckpointsView:
        return views.checkpoints(self.ctx.store, self.ctx.feed, run)

    def _goodput(self, query: Dict[str, List[str]], run: str) -> views.GoodputView:
        return views.goodput(self.ctx.store, run)

    def _alerts(self, query: Dict[str, List[str]]) -> views.AlertsView:
        state = _one(query, "state") or "active"
        if state not in ALERT_STATES:
            raise BadRequest(f"query parameter 'state': expected one of "
                             f"{', '.join(ALERT_STATES)}, got {state!r}")
        rank_text = _one(query, "rank")
        return views.alerts(self.ctx.feed, state, _one(query, "run"),
                            None if rank_text is None else _rank(rank_text))

    def _history(self, query: Dict[str, List[str]]) -> views.AlertHistoryView:
        limit = _int(query, "limit", 100, 1, 1000)
        return views.alert_history(self.ctx.feed, limit, _one(query, "run"))

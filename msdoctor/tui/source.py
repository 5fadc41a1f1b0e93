"""Where the TUI's data comes from: a live sidecar over HTTP, or the core run in-process.

Every source has ``label`` and a blocking ``fetch(request) -> Reading`` (the
app calls it from a worker thread) that raises :class:`SourceError` when the
data cannot be read now; the app shows a banner and retries.
"""
from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from msdoctor.tui.model import Reading
from msdoctor.tui.queries import CoreQueries, HttpQueries
from msdoctor.tui.reader import NotFoundError, Reader, Request, SourceError
from msdoctor.wire.layout import API_PREFIX, DEFAULT_URL, TOKEN_ENV

try:  # orjson is a core dependency; stay usable without it
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover
    _loads = json.loads


def hooks_hint(run_dir: str) -> str:
    """How to make a training script write events into ``run_dir``."""
    return (f"No training events in {run_dir}/events yet.\n\n"
            "Start the hooks in your training script:\n\n"
            "    from trainer_hooks import DoctorCallback\n"
            f"    model.train(epochs, dataset, callbacks=[DoctorCallback({run_dir!r})])\n\n"
            "or try the bundled toy run:  python -m trainer_hooks.toy --run-dir "
            f"{run_dir}\nThis view fills in as soon as the first events arrive.")


class Source:
    """Base class: ``fetch`` one snapshot; ``close`` releases what the source holds.

    ``run_dir`` is the run directory on this machine when there is one (the log pane tails
    its logs, screenshots are saved there), else None."""

    label = "?"
    run_dir: Optional[Path] = None

    def fetch(self, request: Request = Request()) -> Reading:
        raise NotImplementedError

    def close(self) -> None:
        pass


class FixedSource(Source):
    """Hands out given snapshots (tests, benchmarks, screenshots): a callable or a value.

    ``fail`` makes fetch raise :class:`SourceError` with that text until cleared.
    """

    def __init__(self, snapshot: Reading | Callable[[Request], Reading],
                 label: str = "fixed data") -> None:
        self.reading = snapshot
        self.label = label
        self.fail: Optional[str] = None
        self.requests: list = []

    def fetch(self, request: Request = Request()) -> Reading:
        self.requests.append(request)
        if self.fail:
            raise SourceError(self.fail)
        return self.reading(request) if callable(self.reading) else self.reading


class HttpSource(Source):
    """Poll a sidecar's ``/api/v1`` (stdlib ``http.client``; bearer token when given).

    The requests of one fetch share one HTTP/1.1 connection, closed when the fetch ends (a
    refresh costs one connection, not one per request, and nothing is held between
    refreshes). Proxy variables (``http_proxy``) are not used: the sidecar is reached
    directly."""

    def __init__(self, url: str = DEFAULT_URL, token: Optional[str] = None,
                 timeout: float = 3.0) -> None:
        url = url.rstrip("/")
        if "://" not in url:
            url = "http://" + url
        if url.endswith(API_PREFIX):
            url = url[:-len(API_PREFIX)]
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"sidecar URL {url!r}: expected http://HOST:PORT, e.g. {DEFAULT_URL}")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"sidecar URL {url!r}: the port is not a number; expected "
                             f"http://HOST:PORT, e.g. {DEFAULT_URL}") from None
        self.url, self.timeout = url, float(timeout)
        self._parts, self._port = parts, port
        self.token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
        self.label = url
        self._asked_run_dir = False
        self._conn: Optional[http.client.HTTPConnection] = None
        self._lock = threading.Lock()
        self.reader = Reader(HttpQueries(self.get), url, empty_hint=(
            f"The sidecar at {url} has no runs yet.\n\n" + hooks_hint("RUN_DIR").replace(
                "No training events in RUN_DIR/events yet.\n\n", "")))

    def get(self, path: str, params: Mapping[str, Any]) -> Dict[str, Any]:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        target = f"{self._parts.path}{API_PREFIX}{urllib.parse.quote(path)}" + \
            (f"?{query}" if query else "")
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            status, reason, body = self._send(target, headers)
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise SourceError(f"cannot reach the sidecar at {self.url}: {reason}") from None
        if status == 404:
            raise NotFoundError(f"{path}: not found")
        if status == 401:
            raise SourceError(f"the sidecar at {self.url} refused the API token (HTTP 401); "
                              f"pass --token or set ${TOKEN_ENV}")
        if not 200 <= status < 300:
            raise SourceError(f"the sidecar at {self.url} answered HTTP {status} for "
                              f"{path}: {_error_text(body, reason)}")
        try:
            return _loads(body)
        except ValueError as exc:
            raise SourceError(f"the sidecar at {self.url} sent invalid JSON for {path}: "
                              f"{exc}") from None

    def _send(self, target: str, headers: Mapping[str, str]) -> Tuple[int, str, bytes]:
        """One GET on the fetch's connection (opened on first use); (status, reason, body)."""
        with self._lock:
            if self._conn is None:
                kind = http.client.HTTPSConnection if self._parts.scheme == "https" \
                    else http.client.HTTPConnection
                self._conn = kind(self._parts.hostname or "", self._port,
                                  timeout=self.timeout)
            conn = self._conn
            try:
                conn.request("GET", target, headers=dict(headers))
                response = conn.getresponse()
                body = response.read()
            except BaseException:
                self._close_connection()
                raise
            if response.will_close:
                self._close_connection()
            return response.status, response.reason, body

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def fetch(self, request: Request = Request()) -> Reading:
        try:
            reading = self.reader.read(request)
            if not self._asked_run_dir:
                self._asked_run_dir = True
                self.run_dir = self._local_run_dir()
            return reading
        finally:
            with self._lock:
                self._close_connection()

    def close(self) -> None:
        with self._lock:
            self._close_connection()

    def _local_run_dir(self) -> Optional[Path]:
        """The sidecar's run directory when it is a directory on this machine (the TUI runs on
        the training node), else None."""
        try:
            text = self.get("/status", {}).get("run_dir")
        except SourceError:
            return None
        path = Path(text) if isinstance(text, str) and text else None
        return path if path is not None and path.is_dir() else None


def _error_text(body: bytes, reason: str) -> str:
    try:
        return str(_loads(body).get("error", ""))[:200]
    except (ValueError, AttributeError):
        return reason or ""


class EmbeddedSource(Source):
    """Run the pipeline over ``run_dir`` in this process (no sidecar needed).

    The same :class:`~msdoctor.core.pipeline.Pipeline` as ``msdoctor serve`` (wall clock,
    the rules, the active-alert set), without its journal and snapshot: nothing is written
    into the run directory. Snapshots are read from the core views
    (:mod:`msdoctor.core.views`) the sidecar's ``/api/v1`` serves, without JSON.
    """

    def __init__(self, run_dir: os.PathLike | str, rules: Sequence[str] = (),
                 catch_up_s: float = 0.5, clock: Callable[[], float] = time.time) -> None:
        from msdoctor.core.engine import default_rules_dir, load_rules
        from msdoctor.core.pipeline import Pipeline

        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise ValueError(f"run directory {str(self.run_dir)!r} does not exist; expected a "
                             "directory with events/rank-<N>.jsonl (or where they will appear)")
        self.label = str(self.run_dir)
        self.catch_up_s = float(catch_up_s)
        ruleset = load_rules(list(rules) or [str(default_rules_dir())])   # RuleSetError if bad
        self.sidecar = Pipeline(self.run_dir, rules=ruleset, persist=False, clock=clock)
        self.engine, self.feed = self.sidecar.engine, self.sidecar.alerts
        self.reader = Reader(CoreQueries(self.sidecar.store, self.feed), self.label,
                                     empty_hint=hooks_hint(str(self.run_dir)))

    def poll(self) -> int:
        """Read what the spool has now (up to ``catch_up_s`` seconds); the chunk count."""
        deadline = time.monotonic() + self.catch_up_s
        total = 0
        while True:
            chunks = self.sidecar.poll_once()
            total += len(chunks)
            if not chunks or time.monotonic() >= deadline:
                return total

    def fetch(self, request: Request = Request()) -> Reading:
        self.poll()
        with self.sidecar.lock:
            return self.reader.read(request)

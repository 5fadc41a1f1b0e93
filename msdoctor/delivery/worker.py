"""A background sender: bounded queue, batching, retries with backoff, counted failures.

:class:`Deliverer` is what the alert feed talks to. ``on_alert`` only appends
to a bounded queue (a full queue drops the oldest item and counts it), so the
sidecar's ingest never waits on the network. A daemon thread drains the queue
in batches and POSTs them as JSON; a failed POST is retried with exponential
backoff up to ``max_attempts`` and then dropped and counted. An outage is
logged once when it starts and once when it ends.

Subclasses say what to send: :meth:`payload` (a batch of transitions to a JSON
body) and, optionally, :meth:`periodic` (items to re-send on a timer, as
Alertmanager needs for firing alerts).
"""
from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
import time
import urllib.parse
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional

from msdoctor.wire.errors import MsdoctorError

log = logging.getLogger("msdoctor.delivery")

USER_AGENT = "msdoctor-delivery/1"


class DeliveryError(MsdoctorError):
    """One failed POST (network error, timeout or non-2xx status)."""


def post_json(url: str, body: Any, timeout: float, headers: Mapping[str, str] = ()) -> int:
    """POST ``body`` as JSON; return the status or raise :class:`DeliveryError`.

    ``timeout`` bounds the whole request (connect, send, the status line, the headers and
    the body of the answer), not each socket read: a receiver that trickles its answer a
    byte at a time is cut off at the deadline like one that never answers.
    """
    data = json.dumps(body, allow_nan=False, separators=(",", ":")).encode("utf-8")
    parts = urllib.parse.urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        conn = kind(parts.hostname or "", parts.port, timeout=timeout)
    except ValueError as exc:
        raise DeliveryError(f"cannot reach {url}: {exc}") from None
    expired = threading.Event()

    def cut() -> None:                    # wakes a blocked read: it fails at once
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", path, body=data, headers={
            "Content-Type": "application/json", "User-Agent": USER_AGENT, **dict(headers)})
        response = conn.getresponse()
        answer = response.read(1 << 16)
        if expired.is_set():
            raise OSError("deadline passed")
        if not 200 <= response.status < 300:
            detail = answer[:500].decode("utf-8", "replace").strip()
            raise DeliveryError(f"HTTP {response.status} from {url}: "
                                f"{detail or response.reason}")
        return int(response.status)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if expired.is_set():
            raise DeliveryError(f"no complete answer from {url} within {timeout:g} s "
                                f"(the deadline of one request)") from None
        raise DeliveryError(f"cannot reach {url}: {exc}") from None
    finally:
        timer.cancel()
        conn.close()


def check_url(url: str, what: str) -> str:
    """Accept only http(s) URLs (never file:, ftp:, ...)."""
    if not (url.startswith("http://") or url.startswith("https://")):
        raise ValueError(f"{what} URL {url!r}: expected an http:// or https:// URL")
    return url


class Deliverer:
    """Send alert transitions to ``url`` from a background thread."""

    receiver = "deliverer"

    def __init__(self, url: str, queue_size: int = 1000, batch_size: int = 64,
                 timeout: float = 5.0, max_attempts: int = 5, backoff: float = 0.5,
                 max_backoff: float = 30.0, headers: Optional[Mapping[str, str]] = None,
                 post: Callable[..., int] = post_json, clock: Callable[[], float] = time.monotonic,
                 name: Optional[str] = None) -> None:
        self.url = check_url(url, self.receiver)
        if name:
            self.receiver = name
        self.queue_size, self.batch_size = int(queue_size), int(batch_size)
        self.timeout, self.max_attempts = float(timeout), int(max_attempts)
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self.headers = dict(headers or {})
        self._post, self._clock = post, clock
        self._queue: Deque[Dict[str, Any]] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._thread: Optional[threading.Thread] = None
        self.stats: Dict[str, Any] = {"sent": 0, "failed": 0, "dropped": 0, "queued": 0,
                                      "healthy": True}
        self._outage_since: Optional[float] = None
        self._outage_failures = 0

    # -- the ingest side (never blocks) ------------------------------------------------
    def on_alert(self, transition: Dict[str, Any]) -> None:
        """Queue one transition for sending; drop the oldest when the queue is full."""
        with self._cond:
            if len(self._queue) >= self.queue_size:
                self._queue.popleft()
                self.stats["dropped"] += 1
            self._queue.append(transition)
            self.stats["queued"] = len(self._queue)
            self._cond.notify()

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> "Deliverer":
        self._thread = threading.Thread(target=self._run, name=f"msdoctor-{self.receiver}",
                                        daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop after trying to send what is queued (bounded by ``timeout``)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until the queue is empty (for tests and shutdown); True if it emptied."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._cond:
                if not self._queue and not self._busy:
                    return True
            time.sleep(0.01)
        return False

    # -- what to send (subclasses) -----------------------------------------------------
    def payload(self, batch: List[Dict[str, Any]]) -> Any:
        raise NotImplementedError

    def periodic(self, now: float) -> List[Dict[str, Any]]:
        """Items to send again now (default: none)."""
        return []

    def wake_after(self) -> float:
        """Longest sleep before :meth:`periodic` must be asked again."""
        return 3600.0

    # -- the sender thread --------------------------------------------------------------
    _busy = False

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._queue and not self._stop:
                    self._cond.wait(self.wake_after())
                stopping = self._stop
                batch = [self._queue.popleft() for _ in range(min(self.batch_size,
                                                                  len(self._queue)))]
                self.stats["queued"] = len(self._queue)
                self._busy = bool(batch)
            batch.extend(self.periodic(self._clock()))
            if batch:
                self._send(batch, give_up_fast=stopping)
            with self._cond:
                self._busy = False
                if stopping and not self._queue:
                    return

    def _send(self, batch: List[Dict[str, Any]], give_up_fast: bool) -> None:
        delay = self.backoff
        limit = 1 if give_up_fast else self.max_attempts
        attempt = 0
        while attempt < limit:
            attempt += 1
            try:
                self._post(self.url, self.payload(batch), self.timeout, self.headers)
            except DeliveryError as exc:
                self.stats["failed"] += 1
                self._note_failure(str(exc))
                if attempt < limit:
                    with self._cond:
                        if self._cond.wait_for(lambda: self._stop, timeout=delay):
                            limit = attempt + 1       # shutting down: one last try
                    delay = min(delay * 2, self.max_backoff)
                continue
            self.stats["sent"] += len(batch)
            self._note_success()
            return
        self.stats["dropped"] += len(batch)
        log.debug("%s: dropped %d notification(s) after %d attempt(s)", self.receiver,
                  len(batch), attempt)

    def _note_failure(self, message: str) -> None:
        self.stats["healthy"] = False
        self._outage_failures += 1
        if self._outage_since is None:
            self._outage_since = self._clock()
            log.warning("%s: delivery failing: %s (retrying with backoff; further failures are "
                        "counted in msdoctor_alert_delivery_failures_total, not logged)",
                        self.receiver, message)

    def _note_success(self) -> None:
        self.stats["healthy"] = True
        if self._outage_since is not None:
            log.warning("%s: delivery recovered after %d failed attempt(s) over %.0f s",
                        self.receiver, self._outage_failures, self._clock() - self._outage_since)
            self._outage_since, self._outage_failures = None, 0

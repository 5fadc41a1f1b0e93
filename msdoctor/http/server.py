"""The sidecar's HTTP endpoint: ``/metrics`` for Prometheus, ``/api/v1`` for the TUI.

Loopback by default (``127.0.0.1:9089``). Any other address needs
``allow_remote=True`` (``--allow-remote``), and ``/api`` there answers only with the
bearer token (``--api-token`` or ``MSDOCTOR_API_TOKEN``; without one it is refused
with 403, ``/metrics`` stays open). Only GET and HEAD are served; other methods get
405. Nothing is ever read from disk to answer a request: every response is built
from the in-memory state.

Framing (:mod:`msdoctor.http.framing`): a request line longer than 8 KiB gets 414; a
body is read and discarded (up to 64 KiB; a longer one gets 413, ``Transfer-Encoding``
or a malformed ``Content-Length`` 400, each closing the connection), so a body is never
taken for the next request. On a loopback address the ``Host`` header must name
loopback (``localhost``, ``127.0.0.1``, ``[::1]``, ...) or the listen address, else 421:
a web page that re-binds its DNS name to 127.0.0.1 cannot read the sidecar.
"""
from __future__ import annotations

import contextlib
import hmac
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional, Tuple
from urllib.parse import urlsplit

from msdoctor import __version__
from msdoctor.exporter.collector import StoreCollector
from msdoctor.exporter.exposition import CONTENT_TYPE, LabelCache, render
from msdoctor.http.framing import (
    BACKLOG,
    FramingError,
    check_host,
    check_token,
    discard_body,
    is_loopback,
    loopback_hosts,
)
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.layout import DEFAULT_LISTEN, TOKEN_ENV

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

log = logging.getLogger("msdoctor.http")

ALLOWED = "GET, HEAD"


class ListenError(MsdoctorError, ValueError):
    """A listen address that is malformed or not allowed."""


def parse_listen(text: str, what: str = "listen address") -> Tuple[str, int]:
    """``"127.0.0.1:9089"``, ``"[::1]:9089"``, ``"localhost:0"`` -> ``(host, port)``.

    Port 0 is allowed: the system picks a free port, and the server logs the real one
    (:attr:`SidecarServer.url`). ``what`` names the value in the error (e.g. ``--listen``).
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ListenError(f"{what} {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isdigit():
        raise ListenError(f"{what} {text!r}: port {port_text!r} is not a number")
    port = int(port_text)
    if port > 65535:
        raise ListenError(f"{what} {text!r}: port {port} is outside 0-65535")
    return host, port


def check_listen(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless the user opted in."""
    if not is_loopback(host) and not allow_remote:
        raise ListenError(f"refusing to listen on {host!r}: it is not a loopback address. "
                          "Pass --allow-remote to expose /metrics and /api to the network "
                          f"(and set --api-token or {TOKEN_ENV} to protect /api)")


def _json(payload: Any) -> bytes:
    if _orjson is not None:
        return _orjson.dumps(payload)
    return json.dumps(payload, separators=(",", ":")).encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    server_version = f"msdoctor/{__version__}"
    protocol_version = "HTTP/1.1"
    timeout = 30
    #: TCP_NODELAY: an answer is written as headers then body; with Nagle on, a small body
    #: waits for the client's delayed ACK of the headers (~40 ms on Linux) on a kept-alive
    #: connection, and a TUI refresh makes several requests on one.
    disable_nagle_algorithm = True

    def parse_request(self) -> bool:
        """The stdlib's parsing, then the framing rules: bounded request line, no body
        left unread, a loopback ``Host`` on a loopback address. False: answered already."""
        try:
            if not super().parse_request():
                return False
            discard_body(self.raw_requestline, self.headers, self.rfile)
            check_host(self.headers.get("Host"), self.server.owner.allowed_hosts)
        except FramingError as exc:
            self._send(exc.status, "application/json", _json({"error": str(exc)}),
                       {"Connection": "close"})
            return False
        return True

    # every other method (POST, PUT, DELETE, PATCH, OPTIONS, ...) is refused
    def __getattr__(self, name: str) -> Callable[[], None]:
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._send(405, "application/json",
                   _json({"error": f"method {self.command} not allowed; this endpoint is "
                                   f"read-only ({ALLOWED})"}), {"Allow": ALLOWED})

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        owner = self.server.owner
        try:
            if path == "/metrics":
                self._send(200, CONTENT_TYPE, owner.metrics())
            elif path == "/api/v1" or path.startswith("/api/v1/"):
                if owner.api_refused:
                    self._send(403, "application/json", _json({"error": owner.api_refused}))
                    return
                if not self._authorised():
                    self._send(401, "application/json",
                               _json({"error": "missing or wrong bearer token for /api"}),
                               {"WWW-Authenticate": 'Bearer realm="msdoctor"'})
                    return
                if owner.api is None:
                    self._send(404, "application/json", _json({"error": "the API is disabled"}))
                    return
                status, body = owner.answer(path, url.query)
                self._send(status, "application/json", _json(body))
            elif path == "/-/healthy":
                self._send(200, "text/plain; charset=utf-8", b"OK\n")
            elif path == "/":
                self._send(200, "text/plain; charset=utf-8",
                           b"msdoctor sidecar: /metrics (Prometheus), /api/v1/ (JSON)\n")
            else:
                self._send(404, "application/json", _json({"error": f"no such path {path!r}"}))
        except ConnectionError:      # the client hung up before its answer was written:
            self.close_connection = True            # nothing to answer, nothing went wrong
            log.debug("the client of %s went away before its answer", self.path)
        except Exception as exc:  # noqa: BLE001 - a request must never take the sidecar down
            log.exception("error answering %s", self.path)
            self._send(500, "application/json",
                       _json({"error": f"internal error: {type(exc).__name__}"}))

    def _authorised(self) -> bool:
        token = self.server.owner.api_token
        if not token:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        # the header's bytes as sent (http.client decodes them as latin-1) against the
        # token's; the token is printable ASCII (checked at start), so both agree
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode("latin-1", "replace"), token.encode("ascii"))

    def _send(self, status: int, content_type: str, body: bytes,
              headers: Optional[dict] = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("%s " + fmt, self.address_string(), *args)


def connection_cap(limit: Optional[int] = None) -> int:
    """How many connections are served at once: a quarter of the descriptor limit, at most
    ``MAX_CONNECTIONS``, so idle clients can never take the descriptors the spool needs."""
    if limit is None:
        try:
            import resource

            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        except (ImportError, OSError, ValueError):
            limit = 1024
    if limit < 0:                           # RLIM_INFINITY
        return MAX_CONNECTIONS
    return max(2, min(MAX_CONNECTIONS, int(limit) // 4))


MAX_CONNECTIONS = 256
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: 37\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
        b"too many connections; try again soon\n")


class _Server(ThreadingHTTPServer):
    """One thread per connection, at most ``cap`` at once: one more gets a 503 and is closed."""

    daemon_threads = True
    request_queue_size = BACKLOG      # the stdlib's 5 makes concurrent scrapers time out
    owner: "SidecarServer"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.cap = connection_cap()
        self.active = 0
        self.refused = 0
        self._count = threading.Lock()
        super().__init__(*args, **kwargs)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self._count:
            if self.active < self.cap:
                self.active += 1
                return True
            self.refused += 1
            first = self.refused == 1
        if first:
            log.warning("%d connections open, the most served at once (a quarter of the file "
                        "descriptor limit, at most %d): further ones get 503 until some close",
                        self.cap, MAX_CONNECTIONS)
        try:
            request.settimeout(1.0)
            request.sendall(BUSY)
        except OSError:
            pass
        return False

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self._count:
                self.active -= 1
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count:
                self.active -= 1


class SidecarServer:
    """Serve ``/metrics`` (and ``/api/v1`` when ``api`` is given) from a background thread.

    >>> server = SidecarServer(StoreCollector(sidecar.store, feed), api=Api(ctx))
    >>> server.start(); server.url
    'http://127.0.0.1:9089'
    """

    def __init__(self, collector: StoreCollector, api: Any = None, listen: str = DEFAULT_LISTEN,
                 allow_remote: bool = False, api_token: Optional[str] = None,
                 lock: Optional[Any] = None) -> None:
        host, port = parse_listen(listen)
        check_listen(host, allow_remote)
        if api_token:
            check_token(api_token)
        #: why ``/api`` is refused (None: served): beyond loopback it needs a token
        self.api_refused: Optional[str] = None
        if not is_loopback(host) and not api_token:
            self.api_refused = (f"the API needs a bearer token when the sidecar listens beyond "
                                f"loopback ({host}); start it with --api-token or {TOKEN_ENV}")
            log.warning("listening on %s without an API token: /api is refused (403), /metrics "
                        "is served (set --api-token or %s to serve /api)", host, TOKEN_ENV)
        #: names the Host header may carry (None: any; the address is not loopback)
        self.allowed_hosts = loopback_hosts(host) if is_loopback(host) else None
        self.collector = collector
        self.api = api
        self.api_token = api_token or None
        self.lock = lock if lock is not None else contextlib.nullcontext()
        self._cache = LabelCache()
        server_class = _Server
        if ":" in host:
            server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        try:
            self.httpd = server_class((host, port), _Handler)
        except OSError as exc:
            raise ListenError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
        self.httpd.owner = self
        self._thread: Optional[threading.Thread] = None

    @property
    def address(self) -> Tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def metrics(self) -> bytes:
        """The ``/metrics`` body, rendered from the state now."""
        with self.lock:   # the ingest thread changes the store under the same lock
            families = self.collector.families()
        return render(families, self._cache)

    def answer(self, path: str, query: str) -> Tuple[int, Any]:
        """One ``/api/v1`` answer, read from the state under the sidecar's lock."""
        with self.lock:
            return self.api.handle(path, query)

    def start(self) -> "SidecarServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="msdoctor-http",
                                        kwargs={"poll_interval": 0.2}, daemon=True)
        self._thread.start()
        log.info("serving /metrics and /api/v1 on %s", self.url)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

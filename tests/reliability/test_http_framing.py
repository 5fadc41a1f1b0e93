"""HTTP framing of the real ``msdoctor serve`` over loopback, spoken byte by byte on raw
sockets: bodies are never taken for a request, oversized or ambiguous framing is refused and
the connection closed, the ``Host`` header must name loopback, 50 clients connecting at once
are queued, a non-ASCII API token is refused at start, and an Alertmanager that trickles its
answer is cut off at the request's deadline and reported in ``/api/v1/status``."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from msdoctor.wire import encode, make
from tests.reliability.helpers import (
    ROOT,
    Serve,
    http_exchange,
    http_request as request,
    http_responses as responses,
    wait_for,
)
from tests.servers import free_port

pytestmark = pytest.mark.slow


def write_spool(run_dir: Path, steps: int = 5, nan_at: int = 0) -> None:
    events = run_dir / "events"
    events.mkdir(parents=True, exist_ok=True)
    t0 = time.time() - steps
    lines = [encode(make("run_start", 0, t=t0, run=run_dir.name, world_size=1))]
    for n in range(1, steps + 1):
        loss = float("nan") if n == nan_at else 2.0
        lines.append(encode(make("step", 0, step=n, t=t0 + n, loss=loss)))
    (events / "rank-0.jsonl").write_bytes(b"".join(lines))


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("framing")
    write_spool(tmp / "run")
    serve = Serve(tmp / "run", tmp / "serve.log")
    try:
        assert wait_for(serve.up, 60), serve.text()
        yield serve
    finally:
        serve.stop()


def exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    return http_exchange(port, data, timeout=timeout)


def test_a_get_body_holding_a_second_request_is_read_and_discarded_not_answered(sidecar):
    smuggled = request("/api/v1/status", "Host: 127.0.0.1")
    data = request("/-/healthy", "Host: 127.0.0.1", f"Content-Length: {len(smuggled)}",
                   body=smuggled)
    got = responses(http_exchange(sidecar.port, data,
                                  then=request("/-/healthy", "Host: 127.0.0.1",
                                               "Connection: close")))
    assert [status for status, _, _ in got] == [200, 200]       # the two real requests only
    assert all(body == b"OK\n" for _, _, body in got)


@pytest.mark.parametrize("framing, status", [
    (["Transfer-Encoding: chunked"], 400),
    (["Content-Length: 5", "Content-Length: 7"], 400),
    (["Content-Length: -1"], 400),
    (["Content-Length: 0x10"], 400),
    ([f"Content-Length: {10 ** 9}"], 413),
])
def test_ambiguous_or_oversized_body_framing_is_refused_and_the_connection_closed(
        sidecar, framing, status):
    follow = b"0\r\n\r\n" + request("/-/healthy", "Host: 127.0.0.1")
    got = responses(http_exchange(sidecar.port, request("/-/healthy", "Host: 127.0.0.1",
                                                        *framing), then=follow))
    assert len(got) == 1, got                  # nothing after it is read as a request
    code, headers, body = got[0]
    assert code == status and headers.get("connection") == "close"
    assert "error" in json.loads(body)


def test_a_request_line_over_8_kib_gets_414_and_a_repeated_signal_is_asked_for_once(sidecar):
    long_query = "signal=" + ",".join(["loss"] * 13000)            # the 65 KB URL
    got = responses(exchange(sidecar.port, request(
        f"/api/v1/runs/run/ranks/0/series?{long_query}", "Host: 127.0.0.1")))
    assert got[0][0] == 414 and got[0][1]["connection"] == "close"
    short = "signal=" + ",".join(["loss"] * 1000)                 # 5 KB: allowed, deduplicated
    got = responses(exchange(sidecar.port, request(
        f"/api/v1/runs/run/ranks/0/series?{short}", "Host: 127.0.0.1", "Connection: close")))
    assert got[0][0] == 200
    assert list(json.loads(got[0][2])["series"]) == ["loss"]
    many = "signal=" + ",".join(f"s{i}" for i in range(65))
    got = responses(exchange(sidecar.port, request(
        f"/api/v1/runs/run/ranks/0/series?{many}", "Host: 127.0.0.1", "Connection: close")))
    assert got[0][0] == 400 and "at most 64" in json.loads(got[0][2])["error"]


@pytest.mark.parametrize("host, status", [
    ("evil.example", 421), ("evil.example:{port}", 421), ("127.0.0.1.evil.example", 421),
    ("localhost.evil.example:{port}", 421),
    ("127.0.0.1:{port}", 200), ("localhost:{port}", 200), ("LOCALHOST.", 200),
    ("[::1]:{port}", 200), ("127.0.0.2", 200), ("app.localhost:{port}", 200),
])
def test_on_loopback_only_requests_addressed_to_loopback_are_answered(sidecar, host, status):
    header = "Host: " + host.format(port=sidecar.port)
    for path in ("/api/v1/status", "/metrics"):
        got = responses(exchange(sidecar.port, request(path, header, "Connection: close")))
        assert got[0][0] == status, (path, got)
    assert sidecar.process.poll() is None


def listen_backlog(port: int) -> int:
    """The listening socket's accept-queue bound, as the kernel reports it (ss: Send-Q)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                         check=True).stdout.split()
    return int(out[2])


def test_fifty_clients_connecting_while_the_sidecar_is_busy_are_queued_and_answered(sidecar):
    assert listen_backlog(sidecar.port) >= 128
    os.kill(sidecar.process.pid, signal.SIGSTOP)     # nothing is accepted while stopped
    socks = []
    try:
        for _ in range(50):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", sidecar.port))
            socks.append(s)

        def connected() -> bool:
            return all(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                       and _peer(s) for s in socks)
        assert wait_for(connected, 30), "the kernel did not queue 50 connections"
    finally:
        os.kill(sidecar.process.pid, signal.SIGCONT)
    answered = 0
    for s in socks:
        s.setblocking(True)
        s.settimeout(60)
        s.sendall(request("/metrics", "Host: 127.0.0.1", "Connection: close"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        answered += data.startswith(b"HTTP/1.1 200")
        s.close()
    assert answered == 50


def _peer(s: socket.socket) -> bool:
    try:
        s.getpeername()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("token", ["sécret", "tab\there", "ключ"])
def test_a_token_that_is_not_printable_ascii_is_refused_at_start_with_a_clear_error(
        tmp_path, token):
    write_spool(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "msdoctor", "serve", "--run-dir",
                           str(tmp_path / "run"), "--listen", f"127.0.0.1:{free_port()}",
                           "--api-token", token], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "--api-token" in done.stderr and "not printable ASCII" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_token_is_compared_as_the_bytes_the_client_sent(tmp_path):
    write_spool(tmp_path / "run")
    serve = Serve(tmp_path / "run", tmp_path / "serve.log", "--api-token", "s3cr3t-~token")
    try:
        assert wait_for(lambda: serve.process.poll() is not None or _healthy(serve.port), 60)
        ok = responses(exchange(serve.port, request(
            "/api/v1/status", "Host: 127.0.0.1", "Authorization: Bearer s3cr3t-~token",
            "Connection: close")))
        assert ok[0][0] == 200
        for wrong in (b"Bearer s\xc3\xa9cr3t-~token", b"Bearer s3cr3t-~toke\xff", b"Bearer "):
            raw = (b"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + wrong
                   + b"\r\nConnection: close\r\n\r\n")
            assert responses(exchange(serve.port, raw))[0][0] == 401
    finally:
        serve.stop()


def _healthy(port: int) -> bool:
    try:
        return exchange(port, request("/-/healthy", "Host: 127.0.0.1", "Connection: close"),
                        timeout=2).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


class TricklingReceiver:
    """A loopback 'Alertmanager' that reads the request, then sends its answer's headers one
    byte every ``pace`` seconds, forever (each read is quick, the request never completes)."""

    def __init__(self, pace: float = 0.2) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.pace, self.requests, self.closed = pace, 0, threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        self.requests += 1
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while not self.closed.is_set():
                    conn.sendall(b"X")
                    time.sleep(self.pace)
            except OSError:
                return

    def close(self) -> None:
        self.closed.set()
        self.sock.close()


def test_an_alertmanager_that_trickles_its_answer_is_cut_off_and_reported_failing(tmp_path):
    receiver = TricklingReceiver()
    write_spool(tmp_path / "run", steps=20, nan_at=10)       # LossNonFinite fires at step 10
    serve = Serve(tmp_path / "run", tmp_path / "serve.log", "--alertmanager",
                  f"http://127.0.0.1:{receiver.port}")
    try:
        def failing() -> bool:
            try:
                delivery = serve.get("/api/v1/status")["delivery"][0]
            except OSError:
                return False
            return delivery["failed"] >= 2 and not delivery["healthy"]
        assert wait_for(failing, 120, every=0.5), serve.text()
        assert receiver.requests >= 2                 # each attempt ended, the next began
        text = serve.text()
        assert "no complete answer" in text and "within 5 s" in text
    finally:
        serve.stop()
        receiver.close()

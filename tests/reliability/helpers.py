"""Shared helpers of the reliability tests: real ``msdoctor serve`` processes, waiting."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


class Serve:
    """One ``msdoctor serve`` subprocess on a free loopback port; stderr goes to a file."""

    def __init__(self, run_dir: Path, log: Path, *extra: str,
                 preexec: Optional[Callable[[], None]] = None) -> None:
        self.port = free_port()
        self.log = log
        self._fh = open(log, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(run_dir), "--listen",
             f"127.0.0.1:{self.port}", "--poll", "0.05", "--progress-every", "3600", *extra],
            cwd=ROOT, stdout=self._fh, stderr=self._fh, preexec_fn=preexec)

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
            return json.loads(r.read())

    def up(self) -> bool:
        try:
            self.get("/api/v1/status")
            return True
        except OSError:
            return False

    def kill9(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._fh.close()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self._fh.close()
        return code

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, every: float = 0.05) -> bool:
    """Whether ``predicate`` comes true within ``timeout``; a predicate that cannot be judged yet
    (an ``OSError``: the server not listening, or a 404 before it has read the run) is not yet
    true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except OSError:
            pass
        time.sleep(every)
    return False


def spool_lines(run_dir: Path) -> List[Dict[str, Any]]:
    out = []
    for path in sorted((run_dir / "events").glob("rank-*.jsonl")):
        out += [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return out


def toy_training(run_dir: Path, cwd: Path, *args: str) -> subprocess.Popen:
    """``python -m trainer_hooks.toy`` (real MindSpore, GRAPH mode, CPU) in its own process."""
    cwd.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLOG_v": "3"}
    return subprocess.Popen([sys.executable, "-m", "trainer_hooks.toy", "--run-dir", str(run_dir),
                             *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def alert_lines(run_dir: Path) -> Optional[List[bytes]]:
    path = run_dir / "alerts.jsonl"
    return path.read_bytes().splitlines(keepends=True) if path.exists() else None


def serve_once(run_dir: Path, *extra: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """``msdoctor serve`` expected to refuse to start: its exit code and output."""
    return subprocess.run([sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(run_dir),
                           "--poll", "0.05", *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def tree(root: Path) -> Dict[str, Any]:
    """Every path under ``root`` with its kind, size, mode and mtime: what a refused start
    must leave unchanged."""
    out: Dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns,
                                            path.read_bytes() if path.is_file()
                                            and not path.is_symlink() else None)
    return out


def write_events(path: Path, *events: Dict[str, Any], mode: str = "ab") -> None:
    from msdoctor.wire import encode

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as fh:
        fh.write(b"".join(encode(e) for e in events))

# -- raw HTTP over loopback (the framing tests speak bytes, not a client library's idea) ----
def http_request(path: str, *headers: str, body: bytes = b"", method: str = "GET") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + body


def http_responses(raw: bytes) -> List[Tuple[int, Dict[str, str], bytes]]:
    """Split what a server sent into ``(status, headers, body)`` by Content-Length."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        assert sep, f"incomplete response head: {raw[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (line.partition(":") for line in lines[1:])}
        size = int(headers.get("content-length", "0"))
        out.append((status, headers, rest[:size]))
        raw = rest[size:]
    return out


def http_exchange(port: int, data: bytes, then: bytes = b"", timeout: float = 10.0) -> bytes:
    """Send ``data`` on one connection; once a whole response is back, send ``then``; read
    until the server closes. A reset or a broken pipe ends the reading (what came is kept)."""
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            if then:
                while not _whole_response(out):
                    chunk = sock.recv(65536)
                    if not chunk:
                        return out
                    out += chunk
                sock.sendall(then)
            while chunk := sock.recv(65536):
                out += chunk
        except (ConnectionResetError, BrokenPipeError, socket.timeout):
            pass
    return out


def _whole_response(raw: bytes) -> bool:
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return len(rest) >= int(value)
    return True

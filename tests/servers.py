"""Start real Prometheus, Alertmanager and ``msdoctor serve`` processes for tests.

Each server gets a free loopback port and its own temporary directory, is
waited for with a bounded timeout, and is always killed when its context
exits (also when the test fails). Tests that use these are ``@pytest.mark.slow``
and skip when the Debian packages are missing (``scripts/bootstrap-system``).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import yaml

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
PROMTOOL = shutil.which("promtool")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
        return response.read()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until(check: Callable[[], Any], timeout: float, interval: float = 0.2,
               what: str = "condition") -> Any:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except (OSError, ValueError, KeyError) as exc:
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}"
                         + (f" (last error: {last_error})" if last_error else ""))


@dataclass
class Server:
    name: str
    url: str
    proc: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@contextlib.contextmanager
def process(name: str, cmd: Sequence[str], url: str, ready_path: str, workdir: Path,
            timeout: float = 30.0, env: Optional[Dict[str, str]] = None) -> Iterator[Server]:
    """Run ``cmd`` in ``workdir``; yield once ``url + ready_path`` answers 200; always kill it."""
    ready_url = url + ready_path
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(list(cmd), cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})
    server = Server(name, url, proc, log_path)
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}:\n{server.log()}")
            try:
                http_get(ready_url, timeout=2)
                return True
            except (urllib.error.URLError, OSError):
                return False
        wait_until(ready, timeout, what=f"{name} at {ready_url}")
        yield server
    finally:
        server.kill()


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def sidecar(run_dir: Path, workdir: Path, extra: Sequence[str] = ()) -> Iterator[Server]:
    """``msdoctor serve --run-dir run_dir`` on a free loopback port."""
    port = free_port()
    cmd = [sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(run_dir),
           "--listen", f"127.0.0.1:{port}", "--poll", "0.2", "--log-level", "INFO", *extra]
    with process(f"sidecar-{port}", cmd, base_url(port), "/-/healthy", workdir,
                 env={"PYTHONPATH": str(ROOT)}) as server:
        yield server


@contextlib.contextmanager
def prometheus(workdir: Path, targets: List[str], rule_files: Sequence[Path] = (),
               interval: str = "1s", alertmanager: Optional[str] = None,
               federate: Sequence[str] = (), external_labels: Optional[Dict[str, str]] = None
               ) -> Iterator[Server]:
    """A real Prometheus scraping ``targets`` (``host:port``) every ``interval``; and, as a
    global Prometheus, the msdoctor series of the Prometheus servers ``federate``
    (``host:port``, their ``/federate`` with the original labels kept)."""
    if PROMETHEUS is None:
        raise RuntimeError("prometheus is not installed (scripts/bootstrap-system)")
    port = free_port()
    workdir = workdir / f"prometheus-{port}"
    workdir.mkdir()
    scrapes: List[Dict[str, Any]] = []
    if targets:
        scrapes.append({"job_name": "msdoctor", "static_configs": [{"targets": targets}]})
    if federate:
        scrapes.append({"job_name": "federate", "honor_labels": True, "metrics_path": "/federate",
                        "params": {"match[]": ['{__name__=~"msdoctor_.*"}',
                                               'up{job="msdoctor"}']},
                        "static_configs": [{"targets": list(federate)}]})
    config: Dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval,
                   "scrape_timeout": interval, "external_labels": external_labels or {}},
        "scrape_configs": scrapes,
        "rule_files": [str(p) for p in rule_files],
    }
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    cmd = [PROMETHEUS, f"--config.file={workdir / 'prometheus.yml'}",
           f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
           "--storage.tsdb.retention.time=1h", "--log.level=warn"]
    with process(f"prometheus-{port}", cmd, base_url(port), "/-/ready", workdir) as server:
        yield server


@contextlib.contextmanager
def alertmanager(workdir: Path) -> Iterator[Server]:
    """A real Alertmanager with a null receiver (we read alerts back from its API)."""
    if ALERTMANAGER is None:
        raise RuntimeError("prometheus-alertmanager is not installed (scripts/bootstrap-system)")
    port = free_port()
    config = {"route": {"receiver": "null", "group_wait": "1s", "group_interval": "1s",
                        "repeat_interval": "1h"},
              "receivers": [{"name": "null"}]}
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
    cmd = [ALERTMANAGER, f"--config.file={workdir / 'alertmanager.yml'}",
           f"--storage.path={workdir / 'am-data'}", f"--web.listen-address=127.0.0.1:{port}",
           "--cluster.listen-address=", "--log.level=warn"]
    with process(f"alertmanager-{port}", cmd, base_url(port), "/-/ready", workdir) as server:
        yield server


def prom_query(url: str, expr: str) -> List[Dict[str, Any]]:
    """Instant query against Prometheus' HTTP API; the result vector."""
    q = urllib.parse.urlencode({"query": expr})
    body = json.loads(http_get(f"{url}/api/v1/query?{q}"))
    if body.get("status") != "success":
        raise ValueError(f"query {expr!r} failed: {body}")
    return body["data"]["result"]


def prom_alerts(url: str, name: str) -> List[Dict[str, Any]]:
    """Firing alerts called ``name`` in Prometheus."""
    body = json.loads(http_get(f"{url}/api/v1/alerts"))
    return [a for a in body["data"]["alerts"]
            if a["labels"].get("alertname") == name and a["state"] == "firing"]

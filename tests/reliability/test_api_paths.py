"""No request to the sidecar's HTTP server reads a file: path traversal (plain, %-encoded,
double-encoded, backslashes, absolute paths in query parameters) against every route of
``/api/v1`` and ``/metrics`` over a real socket gets 400/404 (or a JSON answer from the
in-memory state) and never the bytes of a file inside or outside the run directory."""
from __future__ import annotations

import http.client

import pytest

from msdoctor.api import Api, Context
from msdoctor.core.pipeline import Pipeline
from msdoctor.exporter.collector import StoreCollector
from msdoctor.http.server import SidecarServer
from tests.spool_factory import write_run

SECRET = "TOP-SECRET-4242"
ROUTES = ["/api/v1/{x}", "/api/v1/runs/{x}", "/api/v1/runs/{x}/ranks",
          "/api/v1/runs/run-a/ranks/{x}", "/api/v1/runs/{x}/ranks/0",
          "/api/v1/runs/run-a/ranks/{x}/series", "/api/v1/runs/{x}/ranks/0/series",
          "/api/v1/runs/{x}/series", "/api/v1/alerts/{x}", "/api/v1/openapi.json/{x}",
          "/metrics/{x}", "/{x}"]
ESCAPES = ["../../../etc/passwd", "..%2f..%2f..%2fetc%2fpasswd", "%2e%2e/%2e%2e/secret.txt",
           "%252e%252e%252fsecret.txt", "..\\..\\secret.txt", "%2e%2e%5c%2e%2e%5csecret.txt",
           "..;/..;/secret.txt", "{tmp}/secret.txt", "%2F{tmp}%2Fsecret.txt",
           "../alerts.jsonl", "..%2fevents%2frank-0.jsonl", ".msdoctor%2fsnapshot.npz",
           "%00../../etc/passwd", "....//....//etc/passwd"]
QUERIES = ["/api/v1/runs/run-a/ranks/0/series?signals={x}",
           "/api/v1/runs/run-a/series?signals=loss&since={x}",
           "/api/v1/runs/run-a/ranks/0/series?signals=loss&max_points={x}",
           "/api/v1/alerts?run={x}", "/api/v1/alerts?rank={x}", "/api/v1/alerts/history?limit={x}",
           "/api/v1/runs?path={x}", "/metrics?file={x}", "/api/v1/status?{x}"]
QUERY_VALUES = ["/etc/passwd", "{tmp}/secret.txt", "..%2F..%2Fetc%2Fpasswd", "file:///etc/passwd",
                "%2e%2e%2fsecret.txt"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api-paths")
    (tmp / "secret.txt").write_text(SECRET + "\n")
    run_dir = tmp / "run"
    run_dir.mkdir()
    write_run(run_dir, ranks=(0, 1), steps=12)
    (run_dir / "alerts.jsonl").write_text('{"alert": "X", "state": "firing", "rank": 0, '
                                          '"note": "' + SECRET + '-alerts"}\n')
    sidecar = Pipeline(run_dir, persist=False)
    sidecar.poll_once()
    srv = SidecarServer(StoreCollector(sidecar.store),
                        Api(Context(sidecar.store, run_dir=str(run_dir))),
                        listen="127.0.0.1:0").start()
    yield srv, tmp
    srv.stop()


def get(srv, raw_path: str):
    conn = http.client.HTTPConnection("127.0.0.1", srv.address[1], timeout=10)
    try:
        conn.putrequest("GET", raw_path, skip_host=False, skip_accept_encoding=True)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def never_a_file(body: bytes) -> bool:
    return (SECRET.encode() not in body and b"root:x:0" not in body
            and b'"type":"step"' not in body and b"PK\x03\x04" not in body)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_traversal_in_any_path_segment_gets_400_or_404_and_no_file(server, route):
    srv, tmp = server
    for escape in ESCAPES:
        path = route.format(x=escape.format(tmp=str(tmp).lstrip("/")))
        status, body = get(srv, path)
        assert status in (400, 404), (path, status, body[:200])
        assert never_a_file(body), path


@pytest.mark.slow
@pytest.mark.parametrize("route", QUERIES)
def test_file_paths_in_query_parameters_are_never_opened(server, route):
    srv, tmp = server
    for value in QUERY_VALUES:
        path = route.format(x=value.format(tmp=str(tmp)))
        status, body = get(srv, path)
        assert status in (200, 400, 404), (path, status, body[:200])
        assert never_a_file(body), path

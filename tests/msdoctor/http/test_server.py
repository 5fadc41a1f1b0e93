"""The sidecar's HTTP server: /metrics and /api/v1 over a real socket, read-only,
loopback unless told otherwise, a bearer token for /api when set (and needed beyond
loopback)."""
from __future__ import annotations

import http.client
import json
import logging
import socket
import struct
import threading
import time
from urllib.parse import urlsplit

import pytest

from msdoctor.api import Api, Context
from msdoctor.core.pipeline import Pipeline
from msdoctor.exporter.collector import StoreCollector
from msdoctor.exporter.exposition import CONTENT_TYPE
from msdoctor.http.server import ListenError, SidecarServer, check_listen, parse_listen

from spool_factory import write_run


@pytest.fixture
def store(tmp_path):
    write_run(tmp_path, ranks=(0, 1), steps=12)
    sc = Pipeline(tmp_path, persist=False)
    sc.poll_once()
    return sc.store


@pytest.fixture
def server(store, tmp_path):
    srv = SidecarServer(StoreCollector(store), Api(Context(store, run_dir=str(tmp_path))),
                        listen="127.0.0.1:0").start()
    yield srv
    srv.stop()


def request(url, method="GET", headers=None, body=None):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request(method, url[len(f"http://{parts.netloc}"):] or "/", body=body,
                     headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_metrics_are_served_in_the_prometheus_text_format(server):
    status, headers, body = request(server.url + "/metrics")
    assert status == 200 and headers["Content-Type"] == CONTENT_TYPE
    assert b'msdoctor_last_step{rank="1",run="run-a"} 12.0' in body


def test_the_api_answers_json_from_the_state(server):
    status, headers, body = request(server.url + "/api/v1/runs/run-a/ranks")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert [r["last_step"] for r in json.loads(body)["ranks"]] == [12, 12]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_every_method_but_get_and_head_is_refused_with_405(server, method):
    for path in ("/metrics", "/api/v1/runs"):
        status, headers, body = request(server.url + path, method=method, body=b"{}")
        assert status == 405 and headers["Allow"] == "GET, HEAD"
        assert "read-only" in json.loads(body)["error"]


def test_head_returns_the_headers_without_a_body(server):
    status, headers, body = request(server.url + "/metrics", method="HEAD")
    assert status == 200 and int(headers["Content-Length"]) > 100 and body == b""


@pytest.mark.parametrize("path", ["/etc/passwd", "/../../etc/passwd", "/api/v1/../../etc/passwd",
                                  "/metrics/../alerts.jsonl", "/alerts.jsonl", "/events/rank-0.jsonl"])
def test_no_path_ever_reaches_a_file(server, path):
    status, _, body = request(server.url + path)
    assert status == 404
    assert b"root:" not in body and b'"type"' not in body


def test_a_non_loopback_address_needs_allow_remote():
    with pytest.raises(ListenError, match="--allow-remote"):
        check_listen("0.0.0.0", allow_remote=False)
    check_listen("127.0.0.1", allow_remote=False)
    check_listen("::1", allow_remote=False)
    check_listen("localhost", allow_remote=False)
    check_listen("0.0.0.0", allow_remote=True)


@pytest.mark.parametrize("text, error", [("9089", "HOST:PORT"), ("host:http", "not a number"),
                                         ("host:-1", "not a number"),
                                         ("127.0.0.1:70000", "outside 0-65535")])
def test_a_malformed_listen_address_is_named_in_the_error(text, error):
    with pytest.raises(ListenError, match=error):
        parse_listen(text)


def test_parse_listen_accepts_ipv6_literals_and_port_0():
    assert parse_listen("[::1]:9089") == ("::1", 9089)
    assert parse_listen("localhost:0") == ("localhost", 0)


def test_port_0_binds_a_free_port_and_the_url_names_it(store):
    server = SidecarServer(StoreCollector(store), listen="127.0.0.1:0")
    try:
        port = server.address[1]
        assert port > 0 and server.url == f"http://127.0.0.1:{port}"
    finally:
        server.httpd.server_close()


def test_a_port_in_use_is_a_clear_error(server, store):
    with pytest.raises(ListenError, match="cannot listen on"):
        SidecarServer(StoreCollector(store), listen=f"127.0.0.1:{server.address[1]}")


def test_with_a_token_the_api_needs_the_bearer_but_metrics_do_not(store, tmp_path):
    srv = SidecarServer(StoreCollector(store), Api(Context(store)), listen="0.0.0.0:0",
                        allow_remote=True, api_token="s3cret").start()
    try:
        url = f"http://127.0.0.1:{srv.address[1]}"
        assert request(url + "/api/v1/runs")[0] == 401
        status, headers, _ = request(url + "/api/v1/runs", headers={"Authorization": "Bearer no"})
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        assert request(url + "/api/v1/runs", headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert request(url + "/metrics")[0] == 200
    finally:
        srv.stop()


def test_beyond_loopback_without_a_token_the_api_is_refused_and_metrics_are_served(store):
    srv = SidecarServer(StoreCollector(store), Api(Context(store)), listen="0.0.0.0:0",
                        allow_remote=True).start()
    try:
        url = f"http://127.0.0.1:{srv.address[1]}"
        status, _, body = request(url + "/api/v1/runs")
        assert status == 403 and "--api-token" in json.loads(body)["error"]
        assert request(url + "/metrics")[0] == 200
    finally:
        srv.stop()


def test_the_serve_command_refuses_a_remote_listen_without_the_flag(tmp_path, capsys):
    from msdoctor.cli import main

    (tmp_path / "events").mkdir()
    assert main(["serve", "--run-dir", str(tmp_path), "--listen", "0.0.0.0:9", "--poll",
                 "0.1"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_a_client_that_hangs_up_before_its_answer_is_neither_an_error_nor_a_traceback(
        store, tmp_path, caplog, capfd):
    lock = threading.Lock()
    srv = SidecarServer(StoreCollector(store), Api(Context(store, run_dir=str(tmp_path))),
                        listen="127.0.0.1:0", lock=lock).start()
    try:
        with caplog.at_level(logging.DEBUG, logger="msdoctor.http"):
            with lock:                          # the answer waits for the sidecar's lock...
                client = socket.create_connection(srv.address, timeout=10)
                client.sendall(b"GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                time.sleep(0.2)                 # ...while the request is being answered
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()                  # and the client resets the connection
                time.sleep(0.2)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not any(
                    "went away" in r.getMessage() for r in caplog.records):
                time.sleep(0.05)
        assert any("went away" in r.getMessage() for r in caplog.records)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert "Traceback" not in capfd.readouterr().err
        status, _, _ = request(srv.url + "/api/v1/runs")     # and the server answers on
        assert status == 200
    finally:
        srv.stop()

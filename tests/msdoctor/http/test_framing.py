"""The HTTP framing rules, without sockets (the real server: tests/reliability/test_http_framing.py)."""
from __future__ import annotations

import io
from email.message import Message

import pytest

from msdoctor.http.framing import (
    MAX_BODY,
    MAX_REQUEST_LINE,
    FramingError,
    TokenError,
    check_host,
    check_token,
    discard_body,
    host_name,
    loopback_hosts,
)


def headers(*pairs: tuple) -> Message:
    message = Message()
    for name, value in pairs:
        message[name] = value
    return message


@pytest.mark.parametrize("value, name", [
    ("127.0.0.1:9400", "127.0.0.1"), ("[::1]:9400", "::1"), ("LocalHost.", "localhost"),
    ("example.com", "example.com"), ("a:b", "a:b"), ("[::1", "[::1"),
])
def test_the_host_name_is_the_header_without_its_port(value, name):
    assert host_name(value) == name


def test_only_loopback_names_or_the_listen_address_pass_on_loopback():
    allowed = loopback_hosts("127.0.0.1")
    for ok in ("localhost:1", "127.9.9.9", "[::1]", "x.localhost", None):
        check_host(ok, allowed)
    for bad in ("evil.example", "127.0.0.1.nip.io", "localhost.evil", "0.0.0.0"):
        with pytest.raises(FramingError) as exc:
            check_host(bad, allowed)
        assert exc.value.status == 421
    check_host("evil.example", None)                 # not bound to loopback: any Host


def test_a_body_is_read_to_its_end_and_bad_framing_is_refused_with_its_status():
    rfile = io.BytesIO(b"12345GET /next")
    discard_body(b"GET / HTTP/1.1\r\n", headers(("Content-Length", "5")), rfile)
    assert rfile.read() == b"GET /next"
    cases = [(b"x" * (MAX_REQUEST_LINE + 1), headers(), 414),
             (b"GET /", headers(("Transfer-Encoding", "chunked")), 400),
             (b"GET /", headers(("Content-Length", "5"), ("Content-Length", "6")), 400),
             (b"GET /", headers(("Content-Length", "+5")), 400),
             (b"GET /", headers(("Content-Length", str(MAX_BODY + 1))), 413),
             (b"GET /", headers(("Content-Length", "9")), 400)]            # ends inside the body
    for line, head, status in cases:
        with pytest.raises(FramingError) as exc:
            discard_body(line, head, io.BytesIO(b"short"))
        assert exc.value.status == status


def test_a_token_must_be_printable_ascii():
    check_token("abc-._~+/=0123")
    for bad in ("sécret", "a b", "tab\t", ""[:0] + "\x7f"):
        with pytest.raises(TokenError, match="not printable ASCII"):
            check_token(bad)

"""The sidecar's HTTP framing rules: what a request may look like before it is answered.

* the request line is at most :data:`MAX_REQUEST_LINE` bytes (else 414): it bounds the work
  of one request (query strings are parsed under the sidecar's lock);
* a body is read and discarded before the answer (a GET has no use for one), so it is never
  taken for the next request on a kept-alive connection (request smuggling behind a proxy);
  a body over :data:`MAX_BODY` bytes gets 413, ``Transfer-Encoding`` or a ``Content-Length``
  that is not one plain number gets 400, and each of those closes the connection;
* on a loopback address the ``Host`` header must name loopback or the listen address (else
  421), so a web page whose DNS name re-binds to 127.0.0.1 cannot read the sidecar;
* the API token is printable ASCII (RFC 6750's token characters are a subset), so the bytes
  a client sends and the bytes compared are the same whatever the client's encoding.
"""
from __future__ import annotations

import ipaddress
from email.message import Message
from typing import BinaryIO, FrozenSet, Optional

from msdoctor.wire.errors import MsdoctorError

MAX_REQUEST_LINE = 8 << 10        # bytes, with the method, the path, the query and the version
MAX_BODY = 64 << 10               # bytes of a body that is read and discarded
BACKLOG = 128                     # pending connections the listening socket queues


class FramingError(MsdoctorError, ValueError):
    """A request refused before it is answered: ``status`` and what was expected."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class TokenError(MsdoctorError, ValueError):
    """An API token that clients could not send byte for byte."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_request_line(line: bytes) -> None:
    if len(line) > MAX_REQUEST_LINE:
        raise FramingError(414, f"request line of {len(line)} bytes; expected at most "
                                f"{MAX_REQUEST_LINE} (shorten the query)")


def discard_body(line: bytes, headers: Message, rfile: BinaryIO) -> None:
    """Check the request line and the body's framing; read the body (if any) and drop it."""
    check_request_line(line)
    if headers.get_all("Transfer-Encoding"):
        raise FramingError(400, "Transfer-Encoding is not accepted; this endpoint takes no "
                                "request body (send none, or a Content-Length)")
    lengths = headers.get_all("Content-Length") or []
    if not lengths:
        return
    values = {v.strip() for v in lengths}
    text = values.pop()
    if values or not text.isdigit() or not text.isascii():
        raise FramingError(400, f"Content-Length {', '.join(map(repr, lengths))}: expected "
                                "one non-negative integer")
    size = int(text)
    if size > MAX_BODY:
        raise FramingError(413, f"request body of {size} bytes; this endpoint takes none "
                                f"(at most {MAX_BODY} bytes are read and ignored)")
    while size > 0:
        data = rfile.read(min(size, 1 << 16))
        if not data:
            raise FramingError(400, "the connection ended inside the request body")
        size -= len(data)


def loopback_hosts(listen_host: str) -> FrozenSet[str]:
    """The names a ``Host`` header may carry besides loopback IP literals."""
    return frozenset({"localhost", listen_host.lower().rstrip(".")})


def host_name(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:9089`` -> ``::1``), lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    name, sep, port = value.rpartition(":")
    host = name if sep and port.isdigit() else value
    return host.rstrip(".") if host != "." else host


def check_host(value: Optional[str], allowed: Optional[FrozenSet[str]]) -> None:
    """Refuse a ``Host`` that does not name loopback (``allowed`` None: any is fine)."""
    if allowed is None or value is None:
        return
    host = host_name(value)
    if host in allowed or host.endswith(".localhost") or is_loopback(host):
        return
    raise FramingError(421, f"Host {value[:100]!r} is not this sidecar: it listens on loopback "
                            "and answers requests addressed to localhost or a loopback address "
                            "only (DNS rebinding protection)")


def check_token(token: str) -> None:
    """Refuse a token with characters outside printable ASCII (``!`` to ``~``)."""
    for i, ch in enumerate(token):
        if not "!" <= ch <= "~":
            raise TokenError(f"API token: character {i + 1} ({ch!r}) is not printable ASCII; "
                             "expected letters, digits and punctuation only (e.g. from "
                             "'openssl rand -hex 32'), the same bytes in every client's encoding")

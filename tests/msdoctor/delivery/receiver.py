"""A real local HTTP endpoint that records POSTed JSON and can be told to fail."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, List


class Receiver:
    """``fail_next`` POSTs answer 500; the rest 200 and are recorded in ``bodies``."""

    def __init__(self, fail_next: int = 0) -> None:
        self.bodies: List[Any] = []
        self.attempts = 0
        self.fail_next = fail_next
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.attempts += 1
                if owner.fail_next > 0:
                    owner.fail_next -= 1
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"try later")
                    return
                owner.bodies.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

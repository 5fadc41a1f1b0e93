"""Wire the sidecar's front ends together: deliverers, ``/metrics`` + ``/api/v1``.

``msdoctor serve`` uses it in three steps::

    endpoint = Endpoint.from_args(args)          # flags from add_arguments()
    pipeline = Pipeline(run_dir, rules=..., journal=True, listeners=endpoint.deliverers)
    endpoint.start(pipeline.store, pipeline.alerts, lock=pipeline.lock); ...; endpoint.stop()
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, List, Optional, Sequence

from msdoctor.core.state import Store
from msdoctor.delivery import AlertmanagerDeliverer, Deliverer, WebhookDeliverer
from msdoctor.http.framing import TokenError, check_token
from msdoctor.wire.layout import DEFAULT_LISTEN, TOKEN_ENV

if TYPE_CHECKING:   # imported when the server starts (prometheus_client stays unloaded until then)
    from msdoctor.http.server import SidecarServer


def add_arguments(parser: argparse.ArgumentParser, listen: bool = True) -> None:
    """The serve flags this module reads (``listen=False`` when the caller has --listen)."""
    if listen:
        parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                            help=f"address for /metrics and /api/v1 (default: {DEFAULT_LISTEN})")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow --listen on a non-loopback address")
    parser.add_argument("--api-token", metavar="TOKEN", default=None,
                        help=f"bearer token required by /api (default: ${TOKEN_ENV}); printable "
                             "ASCII only; needed for /api on a non-loopback --listen")
    parser.add_argument("--alertmanager", action="append", default=[], metavar="URL",
                        help="push alerts to this Alertmanager (repeatable), e.g. "
                             "http://127.0.0.1:9093")
    parser.add_argument("--webhook", action="append", default=[], metavar="URL",
                        help="POST alert transitions as JSON to this URL (repeatable)")
    parser.add_argument("--alert-resend", type=float, default=60.0, metavar="S",
                        help="re-send firing alerts to Alertmanager every S seconds (default: 60)")


def api_token(args: argparse.Namespace) -> Optional[str]:
    """``--api-token``, else ``$MSDOCTOR_API_TOKEN``, else None."""
    return args.api_token or os.environ.get(TOKEN_ENV) or None


def token_error(args: argparse.Namespace) -> Optional[str]:
    """Why the API token cannot be used (None: it can, or there is none)."""
    token = api_token(args)
    try:
        if token:
            check_token(token)
    except TokenError as exc:
        where = "--api-token" if args.api_token else TOKEN_ENV
        return f"{where}: {exc}"
    return None


class Endpoint:
    """The deliverers and the HTTP server of one sidecar."""

    def __init__(self, run_dir: os.PathLike | str, listen: str = DEFAULT_LISTEN,
                 allow_remote: bool = False, api_token: Optional[str] = None,
                 deliverers: Sequence[Deliverer] = ()) -> None:
        self.run_dir = Path(run_dir)
        self.listen, self.allow_remote, self.api_token = listen, allow_remote, api_token
        self.deliverers: List[Deliverer] = list(deliverers)
        self.server: Optional[SidecarServer] = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Endpoint":
        host_url = f"http://{args.listen}/api/v1/alerts"
        deliverers: List[Deliverer] = []
        for i, url in enumerate(args.alertmanager):
            deliverers.append(AlertmanagerDeliverer(
                url, resend_interval=args.alert_resend, generator_url=host_url,
                name="alertmanager" if i == 0 else f"alertmanager-{i + 1}"))
        for i, url in enumerate(args.webhook):
            deliverers.append(WebhookDeliverer(url, name="webhook" if i == 0
                                               else f"webhook-{i + 1}"))
        return cls(args.run_dir, listen=args.listen, allow_remote=args.allow_remote,
                   api_token=api_token(args), deliverers=deliverers)

    def start(self, store: Store, alerts: Any,
              lock: Optional[ContextManager[Any]] = None) -> SidecarServer:
        """Start the HTTP server and the deliverers over ``store`` and ``alerts`` (the
        pipeline's active-alert set); return the server.

        ``lock`` is the sidecar's lock: requests read the store under it.
        Raises :class:`msdoctor.http.server.ListenError` when the address is refused.
        """
        from msdoctor.api import Api, Context
        from msdoctor.exporter.collector import StoreCollector
        from msdoctor.http.server import SidecarServer

        collector = StoreCollector(store, alerts, self.deliverers)
        api = Api(Context(store, alerts, self.deliverers, run_dir=str(self.run_dir)))
        self.server = SidecarServer(collector, api, listen=self.listen,
                                    allow_remote=self.allow_remote, api_token=self.api_token,
                                    lock=lock)
        for deliverer in self.deliverers:
            deliverer.start()
        return self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        for deliverer in self.deliverers:
            deliverer.close()

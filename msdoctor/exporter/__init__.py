"""``/metrics`` for Prometheus: the metric-name table, the collector over the sidecar's
state, a fast text exposition, and the HTTP server that also carries ``/api/v1``.

Submodules load on first use, so ``msdoctor.exporter.names`` and the serve flags
(``msdoctor.exporter.endpoint.add_arguments``) do not import prometheus_client.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "names": "msdoctor.exporter.names",
    "StoreCollector": "msdoctor.exporter.collector",
    "snapshot_families": "msdoctor.exporter.collector",
    "render": "msdoctor.exporter.exposition",
    "DEFAULT_LISTEN": "msdoctor.exporter.server",
    "ListenError": "msdoctor.exporter.server",
    "SidecarServer": "msdoctor.exporter.server",
    "Endpoint": "msdoctor.exporter.endpoint",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'msdoctor.exporter' has no attribute {name!r}")
    mod = importlib.import_module(module)
    return mod if module.endswith("." + name) else getattr(mod, name)

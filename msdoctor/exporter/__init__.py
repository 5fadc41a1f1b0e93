"""``/metrics`` for Prometheus: the metric-name table, the collector over the sidecar's
state and a fast text exposition (served by :mod:`msdoctor.http`).

Submodules load on first use, so ``msdoctor.exporter.names`` does not import
prometheus_client.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "names": "msdoctor.exporter.names",
    "StoreCollector": "msdoctor.exporter.collector",
    "scrape_families": "msdoctor.exporter.collector",
    "render": "msdoctor.exporter.exposition",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'msdoctor.exporter' has no attribute {name!r}")
    mod = importlib.import_module(module)
    return mod if module.endswith("." + name) else getattr(mod, name)

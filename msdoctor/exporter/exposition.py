"""Render metric families in the Prometheus text format (version 0.0.4), fast.

Produces the same bytes as ``prometheus_client.generate_latest`` for the same
families (a test checks it), but works per family instead of per sample:
label strings are cached per label set across scrapes, values are formatted
in one call (orjson's shortest digits, ``repr``'s) plus a fix-up of the few
that Go would print in exponent form. For 1024 ranks this is what keeps ``/metrics`` within budget
(``tests/bench/bench_metrics.py``).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from msdoctor.exporter.collector import Family, LabelValues

try:  # a core dependency; the exposition stays right without it
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_KIND = {"counter": "counter", "gauge": "gauge", "info": "gauge"}


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def format_values(values: Sequence[float]) -> List[str]:
    """Format floats as Go's strconv does (what Prometheus clients print): Python's shortest
    ``repr``, with the few values Go prints otherwise (NaN, +-Inf, positive magnitudes of 1e6
    and more) rewritten as ``prometheus_client.utils.floatToGoString`` does.

    Magnitudes in [1e-4, 1e16) and zeros are formatted by orjson where it is installed: there
    its shortest round-trip digits are ``repr``'s (18 million values checked, none differ;
    ``tests/msdoctor/exporter/test_collector.py`` keeps checking) at ~7x the speed. The rest,
    where ``repr`` writes an exponent, go through ``repr``."""
    floats = np.fromiter(values, dtype=np.float64, count=len(values))
    listed = floats.tolist()
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(floats)
        plain = (magnitude >= 1e-4) & (magnitude < 1e16) | (floats == 0.0)
        big = np.flatnonzero(plain & (floats >= 1e6)).tolist()   # Go writes an exponent
        odd = np.flatnonzero(~plain).tolist()                    # repr writes one
    if _orjson is not None and listed:
        out = _orjson.dumps(listed).decode()[1:-1].split(",")
    else:
        out = list(map(repr, listed))
    texts = [out[i] for i in big]
    for i, text in zip(big, [(t[0] + "." + t[1:d] + t[d + 1:]).rstrip("0.") + _EXPONENT[d - 1]
                             for t in texts for d in (t.index("."),)]):
        out[i] = text
    for i in odd:
        text = repr(listed[i])
        out[i] = _SPECIAL.get(text, text)
    return out


#: Go's exponent suffixes, by the number of digits before the point less one
_EXPONENT = [f"e+{k:02d}" for k in range(17)]
_SPECIAL = {"inf": "+Inf", "-inf": "-Inf", "nan": "NaN"}


class LabelCache:
    """Sample prefixes ``name{a="1",b="2"} `` per metric and label set, kept across scrapes."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._size = 0
        self._cache: Dict[str, Dict[LabelValues, str]] = {}

    def prefixes(self, name: str, label_names: Tuple[str, ...],
                 keys: Sequence[LabelValues]) -> List[str]:
        """``name{labels} `` for every key (labels sorted by name, values escaped)."""
        if self._size > self.limit:
            self._cache.clear()
            self._size = 0
        known = self._cache.setdefault(name, {})
        get = known.get
        out = [get(key) for key in keys]
        if None in out:
            order = sorted(range(len(label_names)), key=label_names.__getitem__)
            for i, text in enumerate(out):
                if text is None:
                    key = keys[i]
                    pairs = ",".join(f'{label_names[j]}="{_escape_value(key[j])}"' for j in order)
                    out[i] = known[key] = f"{name}{{{pairs}}} " if pairs else f"{name} "
                    self._size += 1
        return out


def render(families: Sequence[Family], cache: LabelCache) -> bytes:
    """The text exposition of ``families``."""
    parts: List[str] = []
    for family in families:
        spec = family.spec
        name = spec.sample_name
        parts.append(f"# HELP {name} {_escape_help(spec.help)}\n# TYPE {name} {_KIND[spec.kind]}\n")
        if not family.keys:
            continue
        prefixes = cache.prefixes(name, spec.labels, family.keys)
        parts.append("\n".join(map(str.__add__, prefixes, format_values(family.values))))
        parts.append("\n")
    return "".join(parts).encode("utf-8")

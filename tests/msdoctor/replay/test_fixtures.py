"""The fixture generator's format strings are the installed frameworks' own, verbatim."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import logformats


def _site_packages() -> Path:
    spec = importlib.util.find_spec("mindspore")
    if spec is None or spec.origin is None:
        pytest.skip("mindspore is not installed")
    return Path(spec.origin).parents[1]


@pytest.mark.parametrize("relative", sorted(logformats.SOURCES))
def test_each_format_literal_is_in_the_installed_source(relative):
    path = _site_packages() / relative
    if not path.exists():
        pytest.skip(f"{relative} is not installed")
    source = path.read_text(encoding="utf-8")
    for literal in logformats.SOURCES[relative]:
        assert literal in source, f"{literal!r} is not in {path}"

"""Shared fixtures: one token cache per session, and each real training run started once."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from trainer_hooks.trainer import tokens

from trainer_runs import Runs


@pytest.fixture(scope="session")
def token_cache(tmp_path_factory) -> Path:
    """The tiny preset's tokenizer + token file, built once per session (a few seconds)."""
    cache = tmp_path_factory.mktemp("token-cache")
    tokens.build(cache, 2048, progress=None)
    return cache


@pytest.fixture(scope="session")
def runs(tmp_path_factory, token_cache) -> Iterator[Runs]:
    started = Runs(tmp_path_factory.mktemp("runs"), token_cache)
    yield started
    started.close()

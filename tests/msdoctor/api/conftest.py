"""A real sidecar state (3 ranks, a NaN at step 25) and a real alert feed for the API tests."""
from __future__ import annotations

import json

import pytest

from msdoctor.api import Api, Context
from msdoctor.core.alerts.feed import AlertFeed
from msdoctor.core.pipeline import Pipeline

from api_fixtures import FIRING
from spool_factory import write_run


@pytest.fixture
def env(tmp_path):
    write_run(tmp_path, ranks=(0, 1, 2), steps=40, nan_at=25)
    (tmp_path / "alerts.jsonl").write_text(json.dumps(FIRING) + "\n")
    feed = AlertFeed(tmp_path / "alerts.jsonl")
    sc = Pipeline(tmp_path, persist=False, consumers=[feed])
    sc.poll_once()
    return Api(Context(sc.store, feed, run_dir=str(tmp_path))), sc, tmp_path

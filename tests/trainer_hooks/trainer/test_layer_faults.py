"""Per-layer faults and pre-flight faults on real runs of the bundled trainer, as
``msdoctor replay`` names them: the culprit block in the alert's ``layer`` label."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_runs import events

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
PREFLIGHT = {"VocabularyMismatch", "InitialLossAboveUniform", "WeightsNotLoaded", "LayersNotLoaded"}


def replay(run_dir: Path) -> list:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)["alerts"]


def named(alerts: list, alert: str) -> list:
    return [(a["step"], a["labels"].get("layer")) for a in alerts if a["alert"] == alert]


def test_each_layers_event_comes_before_its_step_event_with_one_entry_per_layer(runs):
    got = [e for e in events(runs["layers"]) if e["type"] in ("layers", "step")]
    assert [e["type"] for e in got[:4]] == ["layers", "step", "layers", "step"]
    first = got[0]
    assert first["names"][:3] == ["embedding", "layers.0", "layers.1"]
    assert len(first["grad_norm"]) == len(first["act_max"]) == len(first["names"])


def test_a_gradient_spike_a_nan_and_a_frozen_block_are_each_pinned_on_their_block(runs):
    alerts = replay(runs["layers"])
    assert named(alerts, "GradNormSpike") == [(30, "layers.1")]
    assert named(alerts, "LossNonFinite") == [(22, "layers.0")]
    assert [layer for _, layer in named(alerts, "LayerFrozen")] == ["layers.0"]


def test_a_block_skipped_at_loading_is_named_at_step_one_and_nothing_else_is_preflight(runs):
    alerts = replay(runs["init-skip"])
    assert named(alerts, "LayersNotLoaded") == [(1, "layers.1")]
    assert {a["alert"] for a in alerts} & PREFLIGHT == {"LayersNotLoaded"}


def test_a_clean_run_raises_no_preflight_alert(runs):
    assert {a["alert"] for a in replay(runs["clean"])} & PREFLIGHT == set()


def test_a_checkpoint_load_that_loads_nothing_is_named_at_step_one(runs):
    alerts = replay(runs["init-nothing"])
    assert {a["alert"] for a in alerts} & PREFLIGHT == {"WeightsNotLoaded"}
    (found,) = [a for a in alerts if a["alert"] == "WeightsNotLoaded"]
    assert found["step"] == 1 and "after loading pretrained weights" in found["summary"]


def test_weights_initialised_at_fifty_times_their_scale_put_the_first_loss_above_uniform(runs):
    alerts = replay(runs["init-hot"])
    assert {a["alert"] for a in alerts} & PREFLIGHT == {"InitialLossAboveUniform"}
    (found,) = [a for a in alerts if a["alert"] == "InitialLossAboveUniform"]
    assert found["step"] == 1 and float(found["value"]) > 1.25 * 7.62   # ln(2048)

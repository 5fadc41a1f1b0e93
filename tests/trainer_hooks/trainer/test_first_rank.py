"""The first rank on a real two-rank run of the bundled trainer, live and in replay.

Rank 1's block 1 spikes first (step 26) but is read late: it starts only once the sidecar has
fired rank 0's GradNormSpike (block 0, step 32); rank 0 then hangs until rank 1 has ended. So
the live sidecar fires rank 0's alert before it has read rank 1's spike, whatever the machine's
load, and its ``first_rank`` is corrected while it fires; ``msdoctor replay`` reads both ranks at once and names rank 1 from the start.
"""
from __future__ import annotations

import pytest
from test_layer_faults import replay

from trainer_runs import journal

pytestmark = pytest.mark.slow


def spikes(transitions: list, rank: int) -> list:
    return [(t["labels"].get("layer"), t["labels"].get("first_rank"), t.get("reason"))
            for t in transitions if t["alert"] == "GradNormSpike" and t["rank"] == rank
            and t["state"] == "firing"]


def test_the_live_sidecar_corrects_first_rank_when_the_first_rank_is_read_late(runs):
    live = journal(runs["first-rank"])
    rank0, rank1 = spikes(live, 0), spikes(live, 1)
    assert rank1 == [("layers.1", "1", None)]
    assert rank0[-1][:2] == ("layers.0", "1")
    # rank 0 fired before rank 1's spike was read: fired with 0, then corrected, once
    assert [r[1] for r in rank0] == ["0", "1"], rank0
    assert rank0[1][2].startswith("first_rank 0 -> 1")


def test_replay_names_the_first_rank_on_both_ranks_alerts(runs):
    alerts = replay(runs["first-rank"])
    got = {a["rank"]: (a["step"], a["labels"].get("layer"), a["labels"].get("first_rank"))
           for a in alerts if a["alert"] == "GradNormSpike"}
    assert got == {0: (32, "layers.0", "1"), 1: (26, "layers.1", "1")}

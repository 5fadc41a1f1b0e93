"""One rule for which rank's run_start describes a run, kept by the state and the engine alike."""
from __future__ import annotations

import pytest

from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import load_rules
from msdoctor.core.spool import Chunk
from msdoctor.core.state import Store
from msdoctor.wire import make


def start(rank, t, **fields):
    return make("run_start", rank, run="r", t=t, **fields)


#: (arrival order of run_starts, expected (world_size, config))
CASES = [
    ([start(1, 1.0, world_size=2, config={"by": 1}), start(0, 2.0, world_size=4, config={"by": 0})],
     (4, {"by": 0})),                                   # a lower rank arriving later wins
    ([start(0, 1.0, world_size=4, config={"by": 0}), start(1, 2.0, world_size=2, config={"by": 1})],
     (4, {"by": 0})),                                   # a higher rank changes nothing
    ([start(0, 1.0, world_size=4, config={"try": 1}), start(0, 9.0, config={"try": 2})],
     (4, {"try": 2})),                                  # the same rank again: the latest wins
    ([start(0, 1.0, config={"by": 0}), start(1, 2.0, world_size=2)],
     (2, {"by": 0})),                                   # a higher rank fills in world_size
]


@pytest.mark.parametrize("events, expected", CASES)
def test_the_store_and_the_engine_fold_run_starts_the_same_way(events, expected):
    store = Store()
    engine = Engine(load_rules([]), sinks=[])
    for event in events:
        store.apply(Chunk(f"events/rank-{event['rank']}.jsonl", event["rank"], "r",
                          events=[event], others=[event]))
        engine.process("r", event["rank"], [event], None)
    run, rc = store.runs["r"], engine.runs["r"]
    assert (run.world_size, run.config) == expected
    assert (rc.world_size, rc.config) == expected

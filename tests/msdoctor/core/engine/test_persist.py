"""The engine's state restored operator by operator is the state it saved, odd ranks too."""
from __future__ import annotations

import json

from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import default_rules_dir, load_rules
from msdoctor.core.snapshot import join_arrays, split_arrays
from msdoctor.wire import make
from tests.msdoctor.core.engine.test_evaluator import shipped_steps
from tests.msdoctor.core.engine.test_stacked import same


def through_the_snapshot(state):
    doc, arrays = split_arrays(state)
    return join_arrays(json.loads(json.dumps(doc, allow_nan=False)), arrays)


def test_a_restored_engine_holds_every_rank_s_states_and_last_values_as_saved():
    shipped = load_rules([default_rules_dir()])
    engine = Engine(shipped)
    engine.process_many([("r", r, [make("run_start", r, run="r", t=1000.0, world_size=4)],
                          shipped_steps(r, 1, 120)) for r in range(4)])
    program = engine.program
    kept = [i for i, node in enumerate(program.nodes) if node.stateful and node.new_state()]
    ranks = engine.runs["r"].ranks
    ranks[1].states[kept[0]] = {}              # not saved: a fresh state comes back
    ranks[2].states[kept[1]] = [1.5, 2.5]      # not a dict: saved rank by rank
    ranks[3].states[kept[2]]["extra"] = 7      # other keys than the other ranks'
    again = Engine(shipped)
    again.load_state_dict(through_the_snapshot(engine.state_dict()))
    for r, ctx in ranks.items():
        back = again.runs["r"].ranks[r]
        assert back.last == ctx.last or same(back.last, ctx.last), r
        for i, state in enumerate(ctx.states):
            want = program.nodes[i].new_state() if (r, i) == (1, kept[0]) else state
            assert same(back.states[i], want), (r, i)

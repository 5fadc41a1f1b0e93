"""How a run's ``run_start`` events, one or more per rank, become the run's facts.

The rule, the same for the sidecar's state and for the rule engine:

* the run_start of the **lowest rank** seen so far wins (rank 0 normally: the rank that
  writes the configuration): it sets ``config`` and ``expect`` (empty when it has none),
  and ``world_size`` when it has one;
* among run_starts of that same rank, the **latest** wins (a restarted rank reports the
  configuration it restarted with);
* a run_start of a higher rank only fills in ``world_size`` while none is known.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Protocol


class RunFacts(Protocol):
    world_size: Optional[int]
    config: Dict[str, Any]
    expect: Dict[str, Any]


def fold_run_start(run: RunFacts, event: Mapping[str, Any], lowest_rank: Optional[int]) -> bool:
    """Fold one run_start ``event`` into ``run`` by the rule above. ``lowest_rank`` is the
    lowest rank whose run_start was folded before (None: none yet). True when the event won
    (its rank is the new lowest rank)."""
    wins = lowest_rank is None or event["rank"] <= lowest_rank
    if wins:
        run.config = dict(event.get("config") or {})
        run.expect = dict(event.get("expect") or {})
    if "world_size" in event and (wins or run.world_size is None):
        run.world_size = event["world_size"]
    return wins

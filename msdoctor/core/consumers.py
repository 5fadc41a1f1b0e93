"""What the pipeline calls on its consumers (the rule engine, the alert feed, the log reporter).

A consumer is a plain object with any of these methods; each is optional, so each is its
own protocol and :data:`Consumer` is any of them::

    on_chunk(chunk, store)      # after each Chunk was applied to the store
    on_tick(now, store)         # once per poll, for clock-driven rules
    state_dict() -> dict        # JSON values and numpy arrays; saved in the snapshot
    load_state_dict(d)          # restored from the snapshot on start

Return values are ignored (the engine returns its transitions, for callers that drive it
directly).
"""
from __future__ import annotations

from typing import Any, Dict, Protocol, Set, Union

from msdoctor.core.spool import Chunk
from msdoctor.core.state import Store


class ChunkConsumer(Protocol):
    def on_chunk(self, chunk: Chunk, store: Store, /) -> object: ...


class TickConsumer(Protocol):
    def on_tick(self, now: float, store: Store, /) -> object: ...


class StatefulConsumer(Protocol):
    def state_dict(self) -> Dict[str, Any]: ...

    def load_state_dict(self, state: Dict[str, Any], /) -> object: ...


Consumer = Union[ChunkConsumer, TickConsumer, StatefulConsumer]


def consumer_name(consumer: Any, taken: Set[str]) -> str:
    """A stable key for a consumer's snapshot state: its ``name`` or class name."""
    base = str(getattr(consumer, "name", None) or type(consumer).__name__)
    name, i = base, 2
    while name in taken:
        name, i = f"{base}#{i}", i + 1
    taken.add(name)
    return name

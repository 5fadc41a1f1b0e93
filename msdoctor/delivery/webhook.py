"""POST alert transitions to a generic webhook as JSON.

Body: ``{"version": "1", "source": "msdoctor", "receiver": NAME, "alerts": [...]}``
where each alert is the transition as written to ``alerts.jsonl`` (non-finite
numbers as the strings ``"nan"``, ``"inf"``, ``"-inf"``). By default only
firing and resolved transitions are sent, as Alertmanager would, and none marked
``caused_by`` (a consequence of another alert firing on the same rank: its cause is sent).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List

from msdoctor.delivery.worker import Deliverer
from msdoctor.wire.numbers import to_wire

DEFAULT_STATES = ("firing", "resolved")


def json_safe(value: Any) -> Any:
    """Non-finite floats (also nested) as their wire strings."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return to_wire(value)


class WebhookDeliverer(Deliverer):
    """Send transitions in the given ``states`` to ``url``."""

    receiver = "webhook"

    def __init__(self, url: str, states: Iterable[str] = DEFAULT_STATES, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.states = frozenset(states)

    def on_alert(self, transition: Dict[str, Any]) -> None:
        if transition.get("state") in self.states and not transition.get("caused_by"):
            super().on_alert(transition)

    def payload(self, batch: List[Dict[str, Any]]) -> Dict[str, Any]:
        return {"version": "1", "source": "msdoctor", "receiver": self.receiver,
                "alerts": [json_safe(t) for t in batch]}

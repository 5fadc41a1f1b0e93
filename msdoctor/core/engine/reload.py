"""Re-load the rule files on request (``msdoctor serve`` on SIGHUP), in the pipeline's thread."""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Sequence, Union

from msdoctor.core.engine.consumer import EngineConsumer
from msdoctor.core.state import Store

log = logging.getLogger("msdoctor.serve")


class RuleReloader:
    """A sidecar consumer that re-loads the rules when asked (SIGHUP), in the sidecar thread.

    A rule set with errors is refused as a whole: the engine keeps the last good set and
    every error is logged with file:line:col. A good set replaces the old one (see
    :meth:`EngineConsumer.replace_rules` for what happens to the alerts of removed rules).
    """

    name = "rules-reload"

    def __init__(self, engine: EngineConsumer, path: Union[Path, str, Sequence[Union[Path, str]]]
                 ) -> None:
        self.paths = [Path(p) for p in ([path] if isinstance(path, (str, Path)) else path)]
        self.engine, self.path = engine, ", ".join(str(p) for p in self.paths)
        self.requested = threading.Event()
        self.reloads = self.refused = 0

    def request(self, signum: int = 0, _frame: Any = None) -> None:
        """Signal handler: only flags the request (the reload runs on the next tick)."""
        self.requested.set()

    def on_tick(self, now: float, store: Store) -> None:
        if self.requested.is_set():
            self.requested.clear()
            self.reload()

    def reload(self) -> bool:
        from msdoctor.core.engine.errors import RuleSetError
        from msdoctor.core.engine.loader import load_rules
        old = {r.alert: r for r in self.engine.rules}
        try:
            ruleset = load_rules(self.paths)
        except RuleSetError as exc:
            self.refused += 1
            for error in exc.errors:
                log.error("rules reload: %s", error)
            log.error("rules reload refused: %d error(s) in %s; keeping the previous %d rules",
                      len(exc.errors), self.path, len(old))
            return False
        except OSError as exc:
            self.refused += 1
            log.error("rules reload refused: cannot read %s (%s); keeping the previous %d rules",
                      self.path, exc, len(old))
            return False
        new = {r.alert: r for r in ruleset}
        ended = self.engine.replace_rules(ruleset)
        self.reloads += 1
        def same(a: Any, b: Any) -> bool:
            fields = ("expr", "for_", "keep_firing_for", "labels", "annotations", "action")
            return all(getattr(a, f) == getattr(b, f) for f in fields)
        changed = sorted(n for n in new.keys() & old.keys() if not same(new[n], old[n]))
        log.info("rules reloaded from %s: %d rules (added: %s; removed: %s; changed: %s)%s",
                 self.path, len(new), ", ".join(sorted(new.keys() - old.keys())) or "none",
                 ", ".join(sorted(old.keys() - new.keys())) or "none",
                 ", ".join(changed) or "none",
                 f"; {len(ended)} alert(s) of removed rules ended" if ended else "")
        return True

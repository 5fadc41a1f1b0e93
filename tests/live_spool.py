"""A spool that grows in real time: ranks step (a background thread appends their lines, with
the real codec) until a test makes one hang (it keeps heartbeating), go silent, or end."""
from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Dict, Iterable, Optional

from msdoctor.wire import encode, make

from spool_factory import STEP_TIME, rank_file, step

#: A hung rank's hook still appends a heartbeat this often.
HEARTBEAT_S = 0.5


class LiveSpool:
    """Ranks of one run that write a step every ``STEP_TIME * slow`` seconds of wall time."""

    def __init__(self, run_dir: Path, run: str, ranks: Iterable[int] = (0, 1),
                 slow: Optional[Dict[int, float]] = None, nan_from: Optional[Dict[int, int]] = None,
                 expect: Optional[dict] = None) -> None:
        self.run_dir, self.run = Path(run_dir), run
        self.ranks = list(ranks)
        self.slow = dict(slow or {})
        self.nan_from = dict(nan_from or {})
        self.mode = dict.fromkeys(self.ranks, "stepping")    # stepping | hung | silent | ended
        self.steps = dict.fromkeys(self.ranks, 0)
        self._next: Dict[int, float] = {}
        self._beat: Dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        now = time.time()
        for rank in self.ranks:
            fields = {"expect": expect} if expect else {}
            self._append(rank, make("run_start", rank, run=run, world_size=len(self.ranks), t=now,
                                    config={"model": "llama-tiny", "precision": "fp16"}, **fields))
            self._next[rank] = self._beat[rank] = now
        self._thread = threading.Thread(target=self._loop, name="live-spool", daemon=True)
        self._thread.start()

    def _append(self, rank: int, event: dict) -> None:
        with rank_file(self.run_dir, rank).open("ab") as f:
            f.write(encode(event))

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            now = time.time()
            with self._lock:
                for rank in self.ranks:
                    mode = self.mode[rank]
                    if mode == "stepping" and now >= self._next[rank]:
                        self.steps[rank] += 1
                        n = self.steps[rank]
                        nan = n >= self.nan_from.get(rank, math.inf)
                        self._append(rank, step(self.run, rank, n, now, self.slow.get(rank, 1.0),
                                                loss=math.nan if nan else None))
                        self._next[rank] = now + STEP_TIME * self.slow.get(rank, 1.0)
                    elif mode == "hung" and now >= self._beat[rank]:
                        self._append(rank, make("heartbeat", rank, run=self.run, t=now,
                                                step=self.steps[rank], dropped=0))
                        self._beat[rank] = now + HEARTBEAT_S

    def hang(self, rank: int) -> float:
        """Stop ``rank``'s steps (its heartbeats go on); the wall time it hung."""
        with self._lock:
            self.mode[rank] = "hung"
            return time.time()

    def silence(self, rank: int) -> None:
        """Stop everything ``rank`` writes (a process killed with no run_end)."""
        with self._lock:
            self.mode[rank] = "silent"

    def end(self, rank: int, status: str = "completed") -> None:
        """Write ``rank``'s run_end."""
        with self._lock:
            self.mode[rank] = "ended"
            self._append(rank, make("run_end", rank, run=self.run, status=status,
                                    step=self.steps[rank], t=time.time()))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

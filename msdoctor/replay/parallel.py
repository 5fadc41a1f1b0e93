"""Read a large spool with several processes: ``msdoctor replay --jobs N``.

Worker ``i`` of ``n`` tails the rank files ``r % n == i`` (:class:`SpoolTailer` with
``part``) and sends the chunks of each of its polls, decoded and columnized, through a
bounded queue. The parent takes poll ``k`` of every worker, puts its chunks in the order one
tailer gives them (by rank, then file name) and hands them to the pipeline: each file is cut
into the same chunks as by one tailer (each poll reads the same bytes of every file), so the
rules see the same sequence and ``--jobs N`` prints what ``--jobs 1`` prints
(``tests/msdoctor/replay/test_parallel.py``). The decode runs in the workers; the rules run
in the parent.
"""
from __future__ import annotations

import multiprocessing
import os
import queue
from pathlib import Path
from typing import Any, Iterator, List, Optional

from msdoctor.core.spool import Chunk, SpoolTailer, drain
from msdoctor.core.spool_typed import STEP

#: Polls a worker may be ahead of the parent (each holds ~4 MiB of every file it reads).
AHEAD = 4
_DONE = "done"


def _work(run_dir: str, index: int, count: int, out: Any) -> None:
    """Worker: every poll of its share of the spool, then ``_DONE``; an error as text."""
    try:
        tailer = SpoolTailer(run_dir, part=(index, count), step_events=False)
        for chunks in drain(tailer, empty=True):
            for chunk in chunks:             # the step dicts stay here: the batch has them
                if chunk.steps is not None:  # (their places stay: the goodput needs the order)
                    chunk.events = [STEP if e.get("type") == "step" else e for e in chunk.events]
            out.put(chunks)
        out.put(_DONE)
    except BaseException as exc:  # noqa: BLE001 - reported by the parent, which stops
        out.put(f"worker {index} of {count}: {type(exc).__name__}: {exc}")


def _order(chunk: Chunk) -> Any:
    return (chunk.rank, os.path.basename(chunk.path))


def parallel_chunks(run_dir: Path, jobs: int) -> Iterator[List[Chunk]]:
    """The polls of a whole spool read by ``jobs`` worker processes, merged in order."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    queues = [context.Queue(AHEAD) for _ in range(jobs)]
    workers = [context.Process(target=_work, args=(str(run_dir), i, jobs, queues[i]),
                               name=f"msdoctor-replay-{i}", daemon=True) for i in range(jobs)]
    for worker in workers:
        worker.start()
    live = list(range(jobs))
    try:
        while live:
            merged: List[Chunk] = []
            for i in list(live):
                item = _next(queues[i], workers[i])
                if item == _DONE:
                    live.remove(i)
                elif isinstance(item, str):
                    raise OSError(f"parallel replay failed: {item}")
                else:
                    merged.extend(item)
            if merged:
                merged.sort(key=_order)
                yield merged
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join(5)


def _next(source: Any, worker: Any) -> Optional[Any]:
    """The next item of one worker; an error text when it died without saying why."""
    while True:
        try:
            return source.get(timeout=1.0)
        except queue.Empty:
            if not worker.is_alive():
                try:
                    return source.get(timeout=1.0)
                except queue.Empty:
                    return f"{worker.name} exited with status {worker.exitcode}"

"""The ``stop_training`` action: ``<run_dir>/control/stop.json``, written atomically."""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Optional

from msdoctor.wire.files import FILE_MODE, make_dir
from msdoctor.wire.layout import STOP_FILE


def write_control(run_dir: os.PathLike | str, name: str, doc: Dict[str, Any]) -> Path:
    """Write ``doc`` as ``<run_dir>/<name>`` (a control file): temp file + rename, so never
    half-written; ``control/`` 0755 and the file 0644 whatever the umask."""
    path = Path(run_dir) / name
    make_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=".control-", suffix=".json", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_stop_request(run_dir: os.PathLike | str, reason: str, alert: str,
                       rank: Optional[int] = None, step: Optional[int] = None,
                       t: Optional[float] = None, run: Optional[str] = None) -> Path:
    """Ask the training of ``run`` in ``run_dir`` to stop. The hooks of another run ignore it."""
    doc = {"v": 1, "reason": str(reason), "alert": str(alert), "run": run,
           "rank": None if rank is None else int(rank),
           "step": None if step is None else int(step),
           "t": float(time.time() if t is None else t)}
    return write_control(run_dir, STOP_FILE, doc)

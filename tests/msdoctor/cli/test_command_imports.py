"""A command imports what it needs: a spool replay loads neither the sidecar nor the log readers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from spool_factory import write_run

ROOT = Path(__file__).resolve().parents[3]
CODE = """
import contextlib, io, json, sys
from msdoctor.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    status = main(["replay", sys.argv[1]])
print(json.dumps([status, sorted(m for m in sys.modules if m.startswith("msdoctor."))]))
"""


def test_a_spool_replay_imports_neither_the_sidecar_nor_the_log_readers(tmp_path):
    write_run(tmp_path / "run", steps=20)
    out = subprocess.run([sys.executable, "-c", CODE, str(tmp_path / "run")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    status, modules = json.loads(out.splitlines()[-1])
    assert status == 0 and "msdoctor.replay.driver" in modules
    loaded = {m for m in modules if m.startswith(("msdoctor.http", "msdoctor.cli.serve",
                                                  "msdoctor.exporter", "msdoctor.tui",
                                                  "msdoctor.replay.mindformers",
                                                  "msdoctor.core.wake"))}
    assert loaded == set()

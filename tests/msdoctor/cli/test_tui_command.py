"""``msdoctor tui URL|RUN_DIR``: the positional argument is a sidecar address or a run directory."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def tui(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msdoctor", "tui", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_a_path_is_taken_as_a_run_directory_and_a_missing_one_is_named(tmp_path):
    done = tui(str(tmp_path / "runs" / "x"))
    assert done.returncode == 2
    assert f"--run-dir '{tmp_path / 'runs' / 'x'}': no such directory; expected a run directory" \
        in done.stderr


def test_rules_given_with_a_sidecar_address_are_refused_saying_what_is_needed(tmp_path):
    done = tui("http://127.0.0.1:9", "--rules", str(tmp_path))
    assert done.returncode == 2
    assert "--rules needs a run directory (a sidecar uses its own rules)" in done.stderr

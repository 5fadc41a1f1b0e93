"""End to end as a person would: a real MindSpore run with an injected NaN, the real
sidecar (``msdoctor serve``), the real TUI in tmux; ``capture-pane`` shows the alert
and its fix. A second test reads the same run directory without a sidecar."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from servers import ROOT, sidecar

TMUX = shutil.which("tmux")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.skipif(TMUX is None, reason="tmux is not installed "
                                 "(scripts/bootstrap-system)")]
FIX_WORDS = "Switch to bf16"


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory) -> Path:
    """40 real training steps of the toy LM with dynamic loss scaling; step 20 is poisoned."""
    work = tmp_path_factory.mktemp("toy")
    run_dir = work / "run"
    subprocess.run([sys.executable, "-m", "trainer_hooks.toy", "--run-dir", str(run_dir),
                    "--steps", "40", "--loss-scale", "--inject-nan-at", "20"],
                   cwd=work, check=True, timeout=240, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (run_dir / "events" / "rank-0.jsonl").stat().st_size > 0
    return run_dir


class Terminal:
    """A detached tmux session on a private socket, running one command."""

    def __init__(self, command: List[str], cwd: Path, size=(120, 40)) -> None:
        self.socket = f"msdoctor-tui-test-{os.getpid()}-{time.monotonic_ns()}"
        env = f"PYTHONPATH={ROOT}"
        line = " ".join(["env", env, *[_quote(c) for c in command]])
        self._tmux("new-session", "-d", "-s", "tui", "-x", str(size[0]), "-y", str(size[1]),
                   "-c", str(cwd), line)

    def _tmux(self, *args: str) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], check=True, capture_output=True,
                              text=True, timeout=10).stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "tui")

    def press(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "tui", key)
            time.sleep(0.3)

    def wait_for(self, check: Callable[[str], bool], timeout: float = 60.0,
                 what: str = "text") -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if check(text):
                return text
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{text}")

    def close(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


def _quote(text: str) -> str:
    import shlex
    return shlex.quote(text)


@contextlib.contextmanager
def terminal(command: List[str], cwd: Path) -> Iterator[Terminal]:
    term = Terminal(command, cwd)
    try:
        yield term
    finally:
        term.close()


ROW = re.compile(r"\b(?:firing|pending|resolved)\s+(?:critical|warning|info)\s+(\w+)")


def open_the_alert(term: Terminal) -> str:
    """Go to the Alerts pane, check the NaN alert is listed, open it (other alerts of the
    run may be listed above it); the dialog's text."""
    term.press("3")
    pane = term.wait_for(lambda s: "LossNonFinite" in s, what="the alert in the Alerts pane")
    listed = [m.group(1) for line in pane.splitlines() for m in ROW.finditer(line)]
    assert "LossNonFinite" in listed, pane
    term.press(*["Down"] * listed.index("LossNonFinite"), "Enter")
    return term.wait_for(lambda s: "Fix" in s and FIX_WORDS in s, what="the opened alert")


def test_the_tui_attached_to_the_sidecar_shows_the_nan_alert_and_its_fix(nan_run, tmp_path):
    with sidecar(nan_run, tmp_path) as side:
        with terminal([sys.executable, "-m", "msdoctor", "tui", side.url], tmp_path) as term:
            overview = term.wait_for(lambda s: "llama" in s.lower() or "step 40" in s,
                                     what="the run header")
            assert "step 40/40" in overview, overview
            assert "RANK" in overview and "LOSS" in overview
            dialog = open_the_alert(term)
            assert "Loss is nan at step 20 on rank 0." in dialog, dialog
            assert "runbook.md#lossnonfinite" in dialog, dialog
            term.press("Escape", "q")


def test_the_tui_over_the_run_directory_alone_shows_the_same_alert(nan_run, tmp_path):
    with terminal([sys.executable, "-m", "msdoctor", "tui", "--run-dir", str(nan_run)],
                  tmp_path) as term:
        overview = term.wait_for(lambda s: "step 40/40" in s, what="the run header")
        assert "RANK" in overview
        dialog = open_the_alert(term)
        assert "Loss is nan at step 20 on rank 0." in dialog, dialog

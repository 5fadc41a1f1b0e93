"""``msdoctor completion SHELL``: the script a shell loads to complete msdoctor's commands."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def completion(shell: str) -> str:
    done = subprocess.run([sys.executable, "-m", "msdoctor", "completion", shell], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def complete(script: Path, *words: str) -> list:
    """What bash offers for the last of ``words`` once ``script`` is loaded."""
    array = " ".join(f"'{w}'" for w in words)
    done = subprocess.run(["bash", "-c", f"source {script}; COMP_WORDS=({array}); "
                           f"COMP_CWORD={len(words) - 1}; _shtab_msdoctor; "
                           'printf "%s\\n" "${COMPREPLY[@]}"'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_bash_completes_commands_options_choices_and_run_directories(tmp_path):
    script = tmp_path / "msdoctor.bash"
    script.write_text(completion("bash"))
    assert "complete -o bashdefault -F _shtab_msdoctor msdoctor" in script.read_text()
    assert complete(script, "msdoctor", "rep") == ["replay", "report"]
    assert complete(script, "msdoctor", "replay", "--fail-on", "") == ["info", "warning",
                                                                       "critical"]
    assert "--no-default-rules" in complete(script, "msdoctor", "serve", "--")
    (tmp_path / "runs" / "llama-a").mkdir(parents=True)
    (tmp_path / "runs" / "notes.txt").write_text("")
    assert complete(script, "msdoctor", "status", f"{tmp_path}/runs/") == \
        [f"{tmp_path}/runs/llama-a"]


def test_zsh_gets_a_compdef_script_and_an_unknown_shell_is_refused():
    assert completion("zsh").startswith("#compdef msdoctor")
    done = subprocess.run([sys.executable, "-m", "msdoctor", "completion", "fish"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid choice: 'fish'" in done.stderr

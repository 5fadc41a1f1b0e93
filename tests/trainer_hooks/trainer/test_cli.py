"""``msdoctor train`` front end: bad input ends in one line and exit status 2; run-dir ownership."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def msdoctor(*argv, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "msdoctor", "train", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv, expected", [
    (["--preset", "huge"], "unknown preset 'huge'; valid presets: tiny, small, llama-1b"),
    (["--inject", "nan@soon"], "bad --inject 'nan@soon'"),
    (["--inject", "explode"], "valid forms: nan@STEP, spike@STEP, periodic@K, stall@STEP"),
    (["--precision", "fp8"], "unknown precision 'fp8'; valid: fp32, fp16, bf16"),
    (["--steps", "0"], "--steps must be a positive integer, got 0"),
    (["--hang-after-s", "0"], "--hang-after-s must be positive seconds, got 0.0"),
])
def test_bad_options_get_one_line_and_exit_status_2(tmp_path, argv, expected):
    done = msdoctor(*argv, "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def test_bf16_is_refused_on_cpu_with_what_to_use_instead(tmp_path):
    done = msdoctor("--precision", "bf16", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2 and "bf16 is not supported on CPU" in done.stderr
    assert "use fp32 (default) or fp16" in done.stderr


def test_a_run_dir_holding_another_run_is_refused_without_resume(tmp_path, token_cache):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"run": "older-run"}))
    done = msdoctor("--run-dir", str(run), "--data-dir", str(token_cache), cwd=tmp_path)
    assert done.returncode == 2
    assert "already holds 'older-run'; pass --resume to continue it, or choose a new --run-dir" \
        in done.stderr
    assert json.loads((run / "config.json").read_text()) == {"run": "older-run"}


def test_resume_refuses_a_run_of_another_model(tmp_path, token_cache):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"run": "r", "preset": "small"}))
    done = msdoctor("--run-dir", str(run), "--data-dir", str(token_cache), "--resume", cwd=tmp_path)
    assert done.returncode == 2 and "--resume: preset differs" in done.stderr

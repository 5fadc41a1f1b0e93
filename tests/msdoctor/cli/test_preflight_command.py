"""``msdoctor preflight`` on a MindFormers-style YAML and a tokenizer.json, as a real subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def preflight(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "msdoctor", "preflight", *argv], env=env,
                          capture_output=True, text=True, timeout=120)


def write(tmp_path: Path, vocab_size: int, tokens: int) -> tuple:
    config = tmp_path / "run.yaml"
    config.write_text(f"model:\n  model_config:\n    type: LlamaConfig\n    vocab_size: {vocab_size}\n")
    tokenizer = tmp_path / "tokenizer.json"
    vocab = {f"t{i}": i for i in range(tokens - 2)}
    tokenizer.write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab},
                                     "added_tokens": [{"id": tokens - 2, "content": "<s>"},
                                                      {"id": tokens - 1, "content": "</s>"}]}))
    return str(config), str(tokenizer)


def test_an_embedding_smaller_than_the_tokenizer_is_reported_with_cause_and_fix(tmp_path):
    config, tokenizer = write(tmp_path, 1984, 2048)
    done = preflight(config, "--tokenizer", tokenizer)
    assert done.returncode == 1, done.stderr
    assert "VocabularyMismatch" in done.stdout and "has 1984 rows" in done.stdout
    assert "cause:" in done.stdout and "fix:" in done.stdout


def test_a_matching_config_and_tokenizer_have_no_finding(tmp_path):
    config, tokenizer = write(tmp_path, 2048, 2048)
    done = preflight(config, "--tokenizer", tokenizer, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"] == []


def test_a_config_that_is_not_yaml_is_refused_with_its_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  model_config: [1, 2\n  vocab_size: 3\n")
    done = preflight(str(bad))
    assert done.returncode == 2
    assert f"{bad}:" in done.stderr and "not valid YAML/JSON" in done.stderr

"""``msdoctor preflight``: check a config (and a tokenizer, a checkpoint) before launching.

The facts go through the shipped pre-flight rules (``rules/preflight.yaml``), the same ones the
hooks' ``run_start`` facts meet at run start, so each finding has the rule's cause and fix:
VocabularyMismatch (tokenizer vs embedding rows), LayersNotLoaded (layers of a checkpoint still
at their initializer). A MindFormers config whose model type is also a transformers config's
(the ``<name> is already used by a transformers config`` error at import) is explained too.
Input is only parsed (YAML/JSON), never executed; a checkpoint is read by a child process that
imports MindSpore (``trainer_hooks.preflight``), this process never does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from msdoctor.cli import UsageError

HELP = "Check a config, tokenizer and checkpoint for pre-flight faults before training."
EPILOG = ("exit status: 0 no finding, 1 findings, 2 bad input. Examples: msdoctor preflight "
          "run.yaml --tokenizer tokenizer.json; msdoctor preflight run.yaml --checkpoint "
          "model.ckpt")


def add_arguments(parser: Any) -> None:
    parser.add_argument("config", help="a MindFormers YAML or a JSON config (config.json of a run)")
    parser.add_argument("--tokenizer", metavar="FILE",
                        help="tokenizer.json (Hugging Face tokenizers) or vocab.json")
    parser.add_argument("--vocab-size", type=int, metavar="N", help="the tokenizer's vocabulary size")
    parser.add_argument("--checkpoint", metavar="CKPT", help="a MindSpore .ckpt to be loaded")
    parser.add_argument("--rules", metavar="DIR", help="rules directory (default: the shipped rules)")
    parser.add_argument("--json", action="store_true", help="findings as JSON")


def _load(path: str) -> Dict[str, Any]:
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    try:
        data = yaml.safe_load(text)        # JSON is YAML too
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise UsageError(f"{where}: not valid YAML/JSON ({getattr(exc, 'problem', exc)}); "
                         "expected a MindFormers YAML or a JSON object") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}:1: expected a mapping at the top, got {type(data).__name__}")
    return data


def model_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """MindFormers' ``model.model_config``, a run's ``model_config``, or the top level."""
    model = config.get("model")
    if isinstance(model, dict) and isinstance(model.get("model_config"), dict):
        return model["model_config"]
    if isinstance(config.get("model_config"), dict):
        return {**config, **config["model_config"]}
    return config


def tokenizer_size(path: str) -> int:
    """Tokens of a tokenizer.json (vocab plus added tokens) or of a vocab.json."""
    data = _load(path)
    model = data.get("model")
    if isinstance(model, dict) and isinstance(model.get("vocab"), (dict, list)):
        ids = set(model["vocab"].values()) if isinstance(model["vocab"], dict) \
            else set(range(len(model["vocab"])))
        ids |= {t.get("id") for t in data.get("added_tokens") or [] if isinstance(t, dict)}
        return len(ids)
    if all(isinstance(v, int) for v in data.values()):
        return len(set(data.values()))
    raise UsageError(f"{path}:1: no vocabulary found; expected tokenizer.json (model.vocab) or "
                     "vocab.json (token -> id)")


def checkpoint_facts(path: str) -> Dict[str, Any]:
    """embedding_rows and layers_at_init of a checkpoint, read by a MindSpore child process."""
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such checkpoint file")
    done = subprocess.run([sys.executable, "-m", "trainer_hooks.preflight", path],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, GLOG_v="3"))
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"{path}: cannot read the checkpoint: {tail}")
    return json.loads(lines[-1])


def config_clash(config: Dict[str, Any]) -> Optional[Dict[str, str]]:
    """A model type that transformers registers too, explained (None: no clash or unknown)."""
    model = model_config(config)
    name = model.get("model_type")
    if not isinstance(name, str):
        return None
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except Exception:  # noqa: BLE001 - transformers absent: nothing to clash with
        return None
    if name not in CONFIG_MAPPING_NAMES:
        return None
    return {"alert": "ConfigNameClash", "severity": "critical",
            "summary": f"model_type {name!r} is already used by a transformers config "
                       f"({CONFIG_MAPPING_NAMES[name]}).",
            "cause": "MindFormers registers its config classes with transformers' AutoConfig; a "
                     "custom config registered under a name transformers already has fails "
                     "with '<name> is already used by a transformers config' (or silently picks "
                     "the other class), depending on the import order.",
            "fix": "Give the custom config its own model_type (e.g. prefix it with your "
                   "project's name), or use MindFormers' built-in class for this model instead "
                   "of registering a copy."}


def findings(facts: Dict[str, Any], rules_dir: Optional[str]) -> List[Dict[str, str]]:
    """The pre-flight rules' alerts on ``facts`` (a run_start config with no step yet)."""
    from msdoctor.core.engine import default_rules_dir, load_rules
    from msdoctor.core.engine.evaluator import Engine
    from msdoctor.wire import make

    rules = [r for r in load_rules([rules_dir or default_rules_dir()])
             if r.alert in ("VocabularyMismatch", "LayersNotLoaded")]
    engine = Engine(rules, clock=lambda: 0.0)
    engine.process("preflight", 0, [make("run_start", 0, t=0.0, run="preflight", config=facts)])
    return [{"alert": a.alert, "severity": a.severity, "summary": a.summary, "cause": a.cause,
             "fix": a.fix} for a in engine.on_tick(1.0) if a.state == "firing"]


def run(args: Any) -> int:
    try:
        config = _load(args.config)
        model = model_config(config)
        facts: Dict[str, Any] = {}
        vocab = model.get("vocab_size")
        if isinstance(vocab, int):
            facts["vocab_size"] = facts["embedding_rows"] = vocab
        if args.tokenizer:
            facts["tokenizer_vocab_size"] = tokenizer_size(args.tokenizer)
        elif args.vocab_size:
            facts["tokenizer_vocab_size"] = args.vocab_size
        elif isinstance(config.get("tokenizer_vocab_size"), int):
            facts["tokenizer_vocab_size"] = config["tokenizer_vocab_size"]
        if args.checkpoint:
            facts.update(checkpoint_facts(args.checkpoint))
    except UsageError as exc:
        sys.stderr.write(f"msdoctor preflight: error: {exc}\n")
        return 2
    found = findings(facts, args.rules)
    clash = config_clash(config)
    if clash:
        found.append(clash)
    if args.json:
        print(json.dumps({"facts": facts, "findings": found}, indent=2))
    else:
        checked = ", ".join(f"{k} {v}" for k, v in facts.items() if not isinstance(v, list))
        print(f"checked: {checked or 'nothing (no vocab_size, tokenizer or checkpoint)'}")
        for f in found:
            print(f"  [{f['severity'].upper()}] {f['alert']}\n    {f['summary']}\n"
                  f"    cause: {f['cause']}\n    fix:   {f['fix']}")
        if not found:
            print("no pre-flight finding")
    return 1 if found else 0

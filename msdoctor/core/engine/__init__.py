"""The rule engine: rule files -> vectorised expression operators -> alert lifecycle.

Typical use::

    rules = load_rules([default_rules_dir()])        # raises RuleSetError listing every error
    engine = Engine(rules, sinks=[print])
    engine.process("run1", 0, events, step_batch)    # or engine.on_chunk(chunk, store)
    engine.on_tick(time.time())

See ``docs/rules.md`` (the language) and ``docs/engine.md`` (the design).
"""
from msdoctor.core.engine.errors import ExprError, RuleError, RuleSetError
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.lifecycle import Duration
from msdoctor.core.engine.loader import (
    check_rules,
    default_rules_dir,
    load_rules,
    parse_duration,
    rule_files,
)
from msdoctor.core.engine.model import Rule, RuleSet

__all__ = ["Engine", "ExprError", "RuleError", "RuleSetError", "parse", "Duration",
           "check_rules", "default_rules_dir", "load_rules", "parse_duration", "rule_files",
           "Rule", "RuleSet"]

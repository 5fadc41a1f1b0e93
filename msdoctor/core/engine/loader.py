"""Load rule files: YAML with positions -> :class:`RuleSet`, collecting EVERY error.

The YAML is composed into nodes (which keep their line and column) and walked
by hand, so each problem is reported as ``file:line:col: group "g" rule "R":
message`` with the expected form, and loading goes on to find the next one.
Expressions and annotation templates are compiled here, at load time.
"""
from __future__ import annotations

import os
import re
import sysconfig
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import yaml
from yaml.constructor import SafeConstructor

from msdoctor.core.engine.causes import check_causes
from msdoctor.core.engine.errors import ExprError, RuleError, RuleSetError
from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.lifecycle import Duration
from msdoctor.core.engine.model import (
    ACTIONS,
    ENGINE_LABELS,
    LOCATION_LABELS,
    SEVERITIES,
    Rule,
    RuleSet,
)
from msdoctor.core.engine.templates import TemplateError, parse_template

TOP_KEYS = ("version", "groups")
GROUP_KEYS = ("name", "rules")
RULE_KEYS = ("alert", "expr", "for", "keep_firing_for", "labels", "annotations", "values",
             "value", "action", "consequence_of")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Alert names (docs/rules.md): CamelCase, as Prometheus alert names are written.
_CAMEL = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
_DURATION = re.compile(r"\s*(\d+)\s*(steps?)\s*\Z|\s*(\d+(?:\.\d+)?)\s*([smh])\s*\Z")
_RECORDS = re.compile(r"(.*\S)\s+and\s+(\d+)\s*records?\s*\Z")
DURATION_FORM = 'a duration like "10 steps", "30s", "5m", "1h" or "500 steps and 10 records"'
_SCALE = {"s": 1.0, "m": 60.0, "h": 3600.0}

#: A file or directory name, as the callers hold it.
StrPath = Union[str, "os.PathLike[str]"]


def default_rules_dir() -> Path:
    """The shipped rules: the checkout's ``rules/`` (source or editable install), else the copy a
    wheel installs under ``<prefix>/share/msdoctor/rules`` (the environment's, then the user's)."""
    checkout = Path(__file__).resolve().parents[3] / "rules"
    if checkout.is_dir():
        return checkout
    for scheme in (None, f"{os.name}_user"):
        try:
            data = sysconfig.get_path("data", scheme) if scheme else sysconfig.get_path("data")
        except KeyError:
            continue
        installed = Path(data) / "share" / "msdoctor" / "rules"
        if installed.is_dir():
            return installed
    return checkout


def rule_files(paths: Sequence[StrPath]) -> List[Path]:
    """Files named by ``paths``: a directory stands for its ``*.yaml``/``*.yml`` (not recursive)."""
    out: List[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(q for q in path.iterdir()
                              if q.suffix in (".yaml", ".yml") and q.is_file()))
        else:
            out.append(path)
    return out


def parse_duration(value: Any) -> Optional[Duration]:
    """``"10 steps"`` / ``"30s"`` / ``"5m"`` / ``"1h"``, optionally ``"... and N records"`` ->
    :class:`Duration`; None if invalid."""
    if not isinstance(value, str):
        return None
    records = 0
    both = _RECORDS.match(value)
    if both is not None:
        value, records = both.group(1), int(both.group(2))
    m = _DURATION.match(value)
    if m is None:
        return None
    if m.group(1) is not None:
        return Duration(float(int(m.group(1))), "steps", records)
    return Duration(float(m.group(3)) * _SCALE[m.group(4)], "s", records)


class _Walker:
    """Walks one file's node tree, appending RuleErrors."""

    def __init__(self, path: str, errors: List[RuleError]) -> None:
        self.path = path
        self.errors = errors
        self.constructor = SafeConstructor()
        self.group: Optional[str] = None
        self.rule: Optional[str] = None
        self.seen_alerts: Dict[str, str] = {}

    def error(self, node: Any, message: str, offset: int = 0) -> None:
        mark = node.start_mark
        col = mark.column + 1
        if offset and isinstance(node, yaml.ScalarNode) and "\n" not in str(node.value):
            col += offset + (1 if node.style in ("'", '"') else 0)
        self.errors.append(RuleError(self.path, mark.line + 1, col, message, self.group, self.rule))

    def scalar(self, node: Any) -> Any:
        """The value of a scalar node; an unsupported tag (``!!python/object``...) is an error
        and reads as None."""
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError:
            self.error(node, f"unsupported YAML tag {node.tag!r}: rule files hold plain "
                             "strings, numbers, lists and mappings")
            return None

    def mapping(self, node: Any, what: str, allowed: Sequence[str],
                required: Sequence[str] = ()) -> Optional[Dict[str, Tuple[Any, Any]]]:
        """``{key: (key_node, value_node)}`` with unknown/duplicate/missing keys reported."""
        if not isinstance(node, yaml.MappingNode):
            self.error(node, f"{what} must be a mapping with keys {', '.join(allowed)}")
            return None
        out: Dict[str, Tuple[Any, Any]] = {}
        for key_node, value_node in node.value:
            key = self.scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                self.error(key_node, f"{what}: keys must be strings, got {key!r}")
                continue
            if key in out:
                self.error(key_node, f"{what}: duplicate key {key!r} (first at line "
                                     f"{out[key][0].start_mark.line + 1})")
                continue
            if allowed and key not in allowed:
                self.error(key_node, f"{what}: unknown key {key!r} (expected one of "
                                     f"{', '.join(allowed)})")
                continue
            out[key] = (key_node, value_node)
        for key in required:
            if key not in out:
                self.error(node, f"{what}: missing required key {key!r}")
        return out


def load_rules(paths: Sequence[StrPath]) -> RuleSet:
    """Load and validate ``paths``; raise :class:`RuleSetError` listing every error."""
    ruleset, errors = check_rules(paths)
    if errors:
        raise RuleSetError(errors)
    return ruleset


def check_rules(paths: Sequence[StrPath]) -> Tuple[RuleSet, List[RuleError]]:
    """Load what can be loaded and collect every error (of every file)."""
    errors: List[RuleError] = []
    ruleset = RuleSet()
    seen_alerts: Dict[str, str] = {}
    seen_groups: Dict[str, str] = {}
    for path in rule_files(paths):
        name = str(path)
        ruleset.files.append(name)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(RuleError(name, 1, 1, f"cannot read rule file: {exc}"))
            continue
        ruleset.rules.extend(_load_file(name, text, errors, seen_groups, seen_alerts))
    errors.extend(check_causes(ruleset.rules, seen_alerts))
    return ruleset, errors


def _load_file(path: str, text: str, errors: List[RuleError], seen_groups: Dict[str, str],
               seen_alerts: Dict[str, str]) -> List[Rule]:
    try:
        loader = yaml.SafeLoader(text)      # rejects control characters before parsing
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - text.rfind("\n", 0, exc.position)
        errors.append(RuleError(path, line, col, f"invalid YAML: {exc.reason} "
                                                 f"(character #x{exc.character:04x})"))
        return []
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        errors.append(RuleError(path, line, col, f"invalid YAML: {exc.problem or exc}"))
        return []
    except yaml.YAMLError as exc:
        errors.append(RuleError(path, 1, 1, f"invalid YAML: {exc}"))
        return []
    finally:
        loader.dispose()
    if root is None:
        errors.append(RuleError(path, 1, 1, "empty rule file: expected 'version: 1' and 'groups:'"))
        return []
    w = _Walker(path, errors)
    w.seen_alerts = seen_alerts
    top = w.mapping(root, "rule file", TOP_KEYS, TOP_KEYS)
    if top is None:
        return []
    if "version" in top:
        node = top["version"][1]
        version = w.scalar(node) if isinstance(node, yaml.ScalarNode) else None
        if version != 1 or isinstance(version, bool):
            w.error(node, f"unsupported version {version!r}: expected 1")
    rules: List[Rule] = []
    if "groups" in top:
        node = top["groups"][1]
        if not isinstance(node, yaml.SequenceNode):
            w.error(node, "'groups' must be a list of groups (- name: ..., rules: [...])")
        else:
            for group_node in node.value:
                rules.extend(_load_group(w, group_node, seen_groups))
    return rules


def _load_group(w: _Walker, node: Any, seen_groups: Dict[str, str]) -> List[Rule]:
    w.group = w.rule = None
    group = w.mapping(node, "group", GROUP_KEYS, GROUP_KEYS)
    if group is None:
        return []
    name = None
    if "name" in group:
        name_node = group["name"][1]
        name = w.scalar(name_node) if isinstance(name_node, yaml.ScalarNode) else None
        if not isinstance(name, str) or not name.strip():
            w.error(name_node, f"group name must be a non-empty string, got {name!r}")
            name = None
        elif name in seen_groups:
            w.error(name_node, f"duplicate group name {name!r} (first in {seen_groups[name]})")
        else:
            seen_groups[name] = f"{w.path}:{name_node.start_mark.line + 1}"
    w.group = name if name is not None else "?"
    rules: List[Rule] = []
    if "rules" in group:
        rules_node = group["rules"][1]
        if not isinstance(rules_node, yaml.SequenceNode):
            w.error(rules_node, "'rules' must be a list of rules (- alert: ...)")
            return []
        for i, rule_node in enumerate(rules_node.value, 1):
            w.rule = f"#{i}"
            rule = _load_rule(w, rule_node)
            if rule is not None:
                rules.append(rule)
    w.rule = None
    return rules


def _load_rule(w: _Walker, node: Any) -> Optional[Rule]:
    before = len(w.errors)
    alert = None
    alert_node = None
    if isinstance(node, yaml.MappingNode):          # name the rule before reporting anything
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == "alert":
                alert_node = value_node
        if alert_node is not None:
            alert = w.scalar(alert_node) if isinstance(alert_node, yaml.ScalarNode) else None
            if isinstance(alert, str) and _IDENT.match(alert):
                w.rule = alert
    raw = w.mapping(node, "rule", RULE_KEYS, ("alert", "expr", "labels", "annotations"))
    if raw is None:
        return None
    if alert_node is not None:
        if not isinstance(alert, str) or not _CAMEL.match(alert):
            w.error(alert_node, f"invalid alert name {alert!r}: expected a CamelCase name (a "
                                f"capital letter, then letters and digits) such as LossNonFinite")
            alert = None
        else:
            first = w.seen_alerts.get(alert)
            if first is not None:
                w.error(alert_node, f"duplicate alert name {alert!r} (first defined at {first}); "
                                    f"alert names must be unique")
            else:
                w.seen_alerts[alert] = f"{w.path}:{alert_node.start_mark.line + 1}"
    condition = _expr(w, raw.get("expr"), "expr")
    for_ = _duration(w, raw.get("for"), "for")
    keep = _duration(w, raw.get("keep_firing_for"), "keep_firing_for")
    labels = _labels(w, raw.get("labels"))
    values: Dict[str, Tuple[str, Any]] = {}
    if "values" in raw:
        vmap = w.mapping(raw["values"][1], "values", ())
        for key, (key_node, value_node) in (vmap or {}).items():
            if not _IDENT.match(key):
                w.error(key_node, f"values: name {key!r} must be an identifier")
                continue
            compiled = _expr(w, (key_node, value_node), f"values.{key}")
            if compiled is not None:
                values[key] = (str(w.scalar(value_node)), compiled)
    value = _expr(w, raw.get("value"), "value") if "value" in raw else None
    annotations, templates = _annotations(w, raw.get("annotations"), labels, values, raw)
    action = None
    if "action" in raw:
        action_node = raw["action"][1]
        action = w.scalar(action_node) if isinstance(action_node, yaml.ScalarNode) else None
        if action not in ACTIONS:
            w.error(action_node, f"unknown action {action!r}: expected {' or '.join(ACTIONS)}")
    causes = _causes(w, raw.get("consequence_of"))
    if len(w.errors) != before or alert is None or condition is None:
        return None
    return Rule(alert=alert, expr=str(w.scalar(raw["expr"][1])), condition=condition,
                value=value if value is not None else condition.value_node(),
                for_=for_ or Duration(), keep_firing_for=keep or Duration(), labels=labels or {},
                annotations=annotations, templates=templates, values=values, action=action,
                consequence_of=tuple(n for n, _ in causes),
                cause_marks=tuple(m for _, m in causes), group=w.group or "", path=w.path,
                line=node.start_mark.line + 1)


def _expr(w: _Walker, item: Optional[Tuple[Any, Any]], what: str) -> Any:
    if item is None:
        return None
    node = item[1]
    text = w.scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        w.error(node, f"{what}: expected an expression such as 'nonfinite(loss)', got "
                      f"{'a ' + node.id if not isinstance(node, yaml.ScalarNode) else repr(text)}")
        return None
    try:
        return parse(str(text))
    except ExprError as exc:
        w.error(node, f"invalid {what} {str(text)!r}: {exc.message}", exc.offset)
        return None


def _causes(w: _Walker, item: Optional[Tuple[Any, Any]]) -> List[Tuple[str, Tuple[int, int]]]:
    """``consequence_of``: an alert name or a list of them, each with its (line, col)."""
    if item is None:
        return []
    node = item[1]
    nodes = node.value if isinstance(node, yaml.SequenceNode) else [node]
    out: List[Tuple[str, Tuple[int, int]]] = []
    for name_node in nodes:
        scalar = isinstance(name_node, yaml.ScalarNode)
        name = w.scalar(name_node) if scalar else None
        if not isinstance(name, str) or not _IDENT.match(name):
            got = repr(name) if scalar else f"a {name_node.id}"
            w.error(name_node, f"consequence_of: expected an alert name or a list of alert "
                               f"names such as [LossNonFinite], got {got}")
        elif name in (n for n, _ in out):
            w.error(name_node, f"consequence_of: {name!r} is named twice")
        else:
            mark = name_node.start_mark
            out.append((name, (mark.line + 1, mark.column + 1)))
    return out


def _duration(w: _Walker, item: Optional[Tuple[Any, Any]], what: str) -> Optional[Duration]:
    if item is None:
        return None
    node = item[1]
    value = w.scalar(node) if isinstance(node, yaml.ScalarNode) else None
    duration = parse_duration(value)
    if duration is None:
        w.error(node, f"invalid '{what}': expected {DURATION_FORM}, got {value!r}")
    return duration


def _labels(w: _Walker, item: Optional[Tuple[Any, Any]]) -> Optional[Dict[str, str]]:
    if item is None:
        return None
    raw = w.mapping(item[1], "labels", (), ("severity",))
    if raw is None:
        return None
    labels: Dict[str, str] = {}
    for key, (key_node, value_node) in raw.items():
        value = w.scalar(value_node) if isinstance(value_node, yaml.ScalarNode) else None
        if not _IDENT.match(key):
            w.error(key_node, f"labels: name {key!r} must be an identifier")
        elif key in ENGINE_LABELS:
            w.error(key_node, f"labels: {key!r} is set by the engine; choose another name")
        elif isinstance(value, (dict, list)) or value is None:
            w.error(value_node, f"labels: value of {key!r} must be a string, got {value!r}")
        elif key == "severity" and value not in SEVERITIES:
            w.error(value_node, f"invalid severity {value!r}: expected one of "
                                f"{', '.join(SEVERITIES)}")
        else:
            labels[key] = str(value)
    return labels


def _annotations(w: _Walker, item: Optional[Tuple[Any, Any]], labels: Optional[Dict[str, str]],
                 values: Dict[str, Any], raw: Dict[str, Any]) -> Tuple[Dict[str, str], Dict[str, Any]]:
    annotations: Dict[str, str] = {}
    templates: Dict[str, Any] = {}
    if item is None:
        return annotations, templates
    amap = w.mapping(item[1], "annotations", (), ("summary",))
    known_labels = set(labels or {}) | set(ENGINE_LABELS) | set(LOCATION_LABELS) | {"severity"}
    declared_values = set()
    if "values" in raw and isinstance(raw["values"][1], yaml.MappingNode):
        declared_values = {w.scalar(k) for k, _ in raw["values"][1].value
                           if isinstance(k, yaml.ScalarNode)}
    for key, (_key_node, value_node) in (amap or {}).items():
        text = w.scalar(value_node) if isinstance(value_node, yaml.ScalarNode) else None
        if not isinstance(text, str):
            if isinstance(text, (int, float)) and not isinstance(text, bool):
                text = str(text)
            else:
                w.error(value_node, f"annotations: {key!r} must be a string, got {text!r}")
                continue
        try:
            template = parse_template(text)
        except TemplateError as exc:
            w.error(value_node, f"annotation {key!r}: {exc.message}", exc.offset)
            continue
        bad = False
        for ref in template.refs():
            head, _, name = ref.ref.partition(".")
            if head == "labels" and name not in known_labels:
                w.error(value_node, f"annotation {key!r}: unknown label {name!r} in "
                                    f"{{{{ $labels.{name} }}}} (labels: "
                                    f"{', '.join(sorted(known_labels))})")
                bad = True
            elif head == "values" and name not in declared_values:
                w.error(value_node, f"annotation {key!r}: {{{{ $values.{name} }}}} is not "
                                    f"declared in the rule's 'values:' map")
                bad = True
        if not bad:
            annotations[key] = text
            templates[key] = template
    return annotations, templates

"""Parse a rule expression into a node tree: a whitelisted subset of Python syntax, never eval.

The text is parsed by :func:`ast.parse` (``mode="eval"``) and every node is
checked against a whitelist: number literals, the named constants, signal
names, ``+ - * / % **`` (literal exponent), comparisons, ``and or not`` and
calls of the function table with positional arguments. Anything else
(attributes, subscripts, lambdas, comprehensions, strings, keywords, ...) is an
:class:`ExprError` naming the construct and its column. Size and depth are
bounded before and during parsing, so no input can exhaust the parser.
"""
from __future__ import annotations

import ast
import math
import warnings
from typing import List, Optional

import msdoctor.core.engine.nodes as nodes
from msdoctor.core.engine.errors import ExprError
from msdoctor.core.engine.functions import (
    ALPHA,
    CONSTANTS,
    EXPECTED_ARG,
    EXPR,
    FUNCTIONS,
    IDENT,
    MAX_STEPS,
    SIGNALS,
    STEPS,
    STEPS0,
)
from msdoctor.core.engine.nodes import Node

MAX_CHARS = 2000
MAX_DEPTH = 32
MAX_NODES = 400
MAX_EXPONENT = 64

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_WHAT = {
    ast.Attribute: "attribute access", ast.Subscript: "subscripts", ast.Lambda: "lambdas",
    ast.ListComp: "comprehensions", ast.SetComp: "comprehensions", ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions", ast.Starred: "starred arguments", ast.IfExp: "if-expressions",
    ast.List: "lists", ast.Tuple: "tuples", ast.Dict: "dicts", ast.Set: "sets",
    ast.JoinedStr: "f-strings", ast.NamedExpr: "assignments", ast.Await: "await",
    ast.Yield: "yield", ast.YieldFrom: "yield", ast.Slice: "slices",
}


def _nesting(text: str) -> int:
    depth = best = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            best = max(best, depth)
        elif ch in ")]}":
            depth -= 1
    return best


def parse(text: str) -> Node:
    """Compile ``text`` into a node tree; raise :class:`ExprError` if it is not in the language."""
    if not isinstance(text, str):
        raise ExprError(f"expected an expression (a string), got {text!r}")
    if not text.strip():
        raise ExprError("empty expression")
    if len(text) > MAX_CHARS:
        raise ExprError(f"expression too long: {len(text)} characters, at most {MAX_CHARS}")
    if _nesting(text) > MAX_DEPTH:
        raise ExprError(f"expression nested too deeply: more than {MAX_DEPTH} levels of brackets")
    try:
        with warnings.catch_warnings():   # e.g. "1and": Python warns; the whitelist decides
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        offset = max((exc.offset or 1) - 1, 0)
        stripped = text.strip()
        near = stripped[offset:offset + 20] or "the end"
        what = "" if exc.msg in ("invalid syntax", "") else f" ({exc.msg})"
        raise ExprError(f"invalid syntax{what} at {near!r} (column {offset + 1}): expected an "
                        "expression such as 'loss > 3 * median_over(loss, 200)'",
                        offset) from None
    except (RecursionError, MemoryError, ValueError):
        raise ExprError(f"expression nested too deeply (at most {MAX_DEPTH} levels)") from None
    lead = len(text) - len(text.lstrip())
    return _Compiler(lead).compile(tree.body, 0)


def _name(node: ast.AST) -> str:
    return _WHAT.get(type(node), type(node).__name__)


class _Compiler:
    def __init__(self, lead: int) -> None:
        self.lead = lead
        self.count = 0

    def fail(self, node: ast.AST, message: str) -> ExprError:
        return ExprError(message, self.lead + getattr(node, "col_offset", 0))

    def compile(self, node: ast.AST, depth: int) -> Node:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, f"expression too large: more than {MAX_NODES} operations")
        if depth > MAX_DEPTH:
            raise self.fail(node, f"expression nested too deeply: more than {MAX_DEPTH} levels")
        d = depth + 1
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.fail(node, f"{value!r} is not allowed: expected a number, a signal "
                                      f"name or a function call")
            return _const(float(value))
        if isinstance(node, ast.Name):
            if node.id in CONSTANTS:
                return _const(CONSTANTS[node.id])
            if node.id in SIGNALS:
                return nodes.Signal((), [node.id])
            hint = " (a function: call it with parentheses)" if node.id in FUNCTIONS else ""
            raise self.fail(node, f"unknown name {node.id!r}{hint}: expected a signal "
                                  f"({', '.join(SIGNALS)}) or nan, inf, true, false")
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                child = self.compile(node.operand, d)
                if isinstance(child, nodes.Const):
                    return _const(-child.params[0])
                return nodes.Neg([child])
            if isinstance(node.op, ast.UAdd):
                return self.compile(node.operand, d)
            if isinstance(node.op, ast.Not):
                return nodes.Not([self.compile(node.operand, d)])
            raise self.fail(node, "operator '~' is not allowed: expected + - * / % ** or not")
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                exponent = self._literal(node.right)
                if exponent is None or not abs(exponent) <= MAX_EXPONENT:
                    raise self.fail(node.right, f"the exponent of ** must be a number literal "
                                                f"between -{MAX_EXPONENT} and {MAX_EXPONENT}, got "
                                                f"{ast.unparse(node.right)!r}")
                return nodes.Pow([self.compile(node.left, d)], [exponent])
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.fail(node, f"operator {type(node.op).__name__} is not allowed: "
                                      f"expected + - * / % **")
            return nodes.BinOp([self.compile(node.left, d), self.compile(node.right, d)], [op])
        if isinstance(node, ast.Compare):
            ops = []
            for cmp in node.ops:
                sym = _CMPOPS.get(type(cmp))
                if sym is None:
                    raise self.fail(node, f"comparison {type(cmp).__name__} is not allowed: "
                                          f"expected < <= > >= == !=")
                ops.append(sym)
            children = [self.compile(node.left, d)] + [self.compile(c, d) for c in node.comparators]
            return nodes.Compare(children, ops)
        if isinstance(node, ast.BoolOp):
            children = [self.compile(v, d) for v in node.values]
            return (nodes.And if isinstance(node.op, ast.And) else nodes.Or)(children)
        if isinstance(node, ast.Call):
            return self.call(node, d)
        raise self.fail(node, f"not allowed in rule expressions: {_name(node)} (expected "
                              f"numbers, signals, operators and calls of the function table)")

    @staticmethod
    def _literal(node: ast.AST) -> Optional[float]:
        sign = 1.0
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            node = node.operand
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return sign * float(node.value)
        return None

    def call(self, node: ast.Call, depth: int) -> Node:
        if not isinstance(node.func, ast.Name):
            raise self.fail(node, f"only functions of the table can be called, got "
                                  f"{ast.unparse(node.func)!r}")
        fn = FUNCTIONS.get(node.func.id)
        if fn is None:
            raise self.fail(node, f"unknown function {node.func.id!r}: expected one of "
                                  f"{', '.join(sorted(FUNCTIONS))}")
        if node.keywords:
            raise self.fail(node, f"{fn.name}() takes positional arguments only: {fn.usage}")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(node, f"starred arguments are not allowed: {fn.usage}")
        kinds = fn.args
        if fn.variadic and len(node.args) > len(kinds):
            kinds = kinds + kinds[-1:] * (len(node.args) - len(kinds))
        extra = len(node.args) - len(kinds)
        if 0 < extra <= len(fn.optional):
            kinds = kinds + fn.optional[:extra]
        if len(node.args) != len(kinds):
            at_least = "at least " if fn.variadic else ""
            upto = f" to {len(fn.args) + len(fn.optional)}" if fn.optional else ""
            raise self.fail(node, f"{fn.name}() takes {at_least}{len(fn.args)}{upto} argument"
                                  f"{'' if len(fn.args) == 1 and not upto else 's'} "
                                  f"({fn.usage}), got {len(node.args)}")
        children: List[Node] = []
        params: List[float | str] = []
        for arg, kind in zip(node.args, kinds):
            if kind == EXPR:
                child = self.compile(arg, depth)
                if child.clock and (fn.window or fn.name == "rank_median"):
                    raise self.fail(arg, f"clock functions (seconds_since_step, "
                                         f"seconds_since_event, running) cannot be used inside "
                                         f"{fn.name}()")
                children.append(child)
            elif kind == IDENT:
                if not isinstance(arg, ast.Name):
                    raise self.fail(arg, f"argument of {fn.name}() must be "
                                         f"{EXPECTED_ARG[IDENT]}, got {ast.unparse(arg)!r}")
                params.append(arg.id)
            else:
                params.append(self._param(fn.name, fn.usage, arg, kind))
        return fn.build(children, params)

    def _param(self, fname: str, usage: str, arg: ast.AST, kind: str) -> float:
        value = self._literal(arg)
        if value is None or not math.isfinite(value):
            ok = False
        elif kind in (STEPS, STEPS0):
            ok = value.is_integer() and (value >= (1 if kind == STEPS else 0)) and value <= MAX_STEPS
        elif kind == ALPHA:
            ok = 0 < value <= 1
        else:
            ok = True
        if not ok or value is None:
            raise self.fail(arg, f"{usage}: {'n' if kind != ALPHA else 'alpha'} must be "
                                 f"{EXPECTED_ARG[kind]}"
                                 f"{' up to ' + str(MAX_STEPS) if kind in (STEPS, STEPS0) else ''}"
                                 f", got {ast.unparse(arg)!r}")
        return float(value)


def _const(value: float) -> Node:
    return nodes.Const((), [value])

"""The layering holds: wire < core < front ends (independent of each other) < http < cli, and
trainer_hooks sees only wire (import-linter, configured in pyproject.toml); the first-party
import graph has no cycle; no module grows past 500 lines; ruff and mypy pass."""
from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("msdoctor", "trainer_hooks")
MAX_LINES = 500


def run_tool(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python <args>`` in the checkout with this interpreter (the test extra's tools)."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def report(done: subprocess.CompletedProcess) -> str:
    return f"exit status {done.returncode}\n{done.stdout}\n{done.stderr}"


# -- import-linter -------------------------------------------------------------------------

def test_the_layer_contracts_are_kept():
    # lint-imports puts the working directory first on sys.path: this checkout is analysed
    done = run_tool("-c", "import sys; from importlinter.cli import lint_imports_command; "
                          "sys.exit(lint_imports_command())", "--no-cache", "--no-logo")
    assert done.returncode == 0, report(done)
    assert "0 broken" in done.stdout, report(done)


# -- the import graph ----------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def first_party_modules() -> Dict[str, Path]:
    """``dotted.name -> file`` for every module of the first-party packages."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> Iterator[Tuple[str, int]]:
    """Every name an import statement of ``module`` may load (function level included), with
    its line: ``import a.b.c`` -> ``a.b.c``; ``from a.b import c`` -> ``a.b.c`` (a submodule,
    or else a name defined in ``a.b``); relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                yield (f"{source}.{alias.name}" if alias.name != "*" else source), node.lineno


@functools.lru_cache(maxsize=None)
def import_graph() -> Dict[str, Dict[str, int]]:
    """``importer -> {imported module: line}`` among first-party modules; an imported name
    that is not a module counts as an import of the module that defines it."""
    modules = first_party_modules()
    graph: Dict[str, Dict[str, int]] = {m: {} for m in modules}
    for module, path in modules.items():
        for name, line in imported_names(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].setdefault(name, line)
    return graph


def strongly_connected(graph: Dict[str, Dict[str, int]]) -> List[List[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_and_only_that():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}, "e": {"a": 1}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b": 1}, "b": {}}) == []


def test_the_import_graph_counts_function_level_imports_and_submodules():
    graph = import_graph()
    serve = graph["msdoctor.cli.serve"]
    assert "msdoctor.http.wiring" in serve        # `from msdoctor.http import wiring`, in a function
    assert "msdoctor.http" not in serve           # a submodule is an edge to it, not to its package
    assert {"msdoctor.wire", "msdoctor.wire.layout"} <= set(graph["trainer_hooks.wire"])


def test_the_import_graph_resolves_relative_imports(tmp_path):
    package = tmp_path / "msdoctor" / "sub"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import a\n")
    (package / "a.py").write_text("from .b import name\nfrom .. import wire\n")
    assert list(imported_names("msdoctor.sub", package / "__init__.py")) == [("msdoctor.sub.a", 1)]
    assert list(imported_names("msdoctor.sub.a", package / "a.py")) == [
        ("msdoctor.sub.b.name", 1), ("msdoctor.wire", 2)]


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    cycles = strongly_connected(graph)
    described = []
    for component in cycles:
        members = set(component)
        described.append("\n".join(
            f"  {importer} -> {target} ({first_party_modules()[importer].relative_to(ROOT)}:"
            f"{line})"
            for importer in component for target, line in sorted(graph[importer].items())
            if target in members))
    assert not cycles, "import cycles among first-party modules:\n" + "\n\n".join(described)


# -- module size ---------------------------------------------------------------------------

def test_no_module_exceeds_500_lines():
    too_long = {}
    for top in (*PACKAGES, "tests", "grafana", "scripts"):
        for path in (ROOT / top).rglob("*.py"):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                too_long[str(path.relative_to(ROOT))] = lines
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"


# -- linter and type checker ---------------------------------------------------------------

def test_ruff_finds_nothing():
    done = run_tool("-m", "ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, report(done)


def test_mypy_finds_nothing_in_wire_and_core():
    # the files and the strictness come from [tool.mypy]; .mypy_cache (ignored by git) keeps
    # a second run to a second or two
    done = run_tool("-m", "mypy")
    assert done.returncode == 0, report(done)
    assert "Success" in done.stdout, report(done)

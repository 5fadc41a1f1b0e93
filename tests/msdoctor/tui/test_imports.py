"""The TUI is a front end over the core: it imports no other front end."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import msdoctor.tui

FORBIDDEN = ("msdoctor.api", "msdoctor.http", "msdoctor.delivery", "msdoctor.replay",
             "msdoctor.report", "msdoctor.cli", "msdoctor.exporter")
PACKAGE = Path(msdoctor.tui.__file__).parent


def imported(path: Path, package: str) -> Iterator[str]:
    """Every module ``path`` (in ``package``) imports, function-level and relative imports
    included; ``from a import b`` counts as ``a`` and ``a.b``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_no_tui_module_imports_another_front_end():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        package = ".".join(["msdoctor", "tui", *path.relative_to(PACKAGE).parent.parts])
        found += [(path.name, name) for name in imported(path, package) if _forbidden(name)]
    assert found == []


def test_the_scan_sees_function_level_and_relative_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from msdoctor import api\n    import msdoctor.http.server\n"
                      "    from .. import delivery\n")
    found = set(imported(module, "msdoctor.tui"))
    assert {"msdoctor.api", "msdoctor.http.server", "msdoctor.delivery"} <= found
    assert all(map(_forbidden, ("msdoctor.api", "msdoctor.http.server", "msdoctor.delivery")))

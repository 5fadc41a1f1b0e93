"""Make the repo root (the ``grafana`` package) and the shared test helpers importable."""
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for path in (str(TESTS.parent), str(TESTS)):
    if path not in sys.path:
        sys.path.append(path)

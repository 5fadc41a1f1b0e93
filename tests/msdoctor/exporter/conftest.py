"""Make the shared test helpers (tests/spool_factory.py, tests/servers.py) importable."""
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
for path in (str(TESTS.parent), str(TESTS)):
    if path not in sys.path:
        sys.path.append(path)

"""Make the log-line generator (tests/fixtures/logs/logformats.py) importable."""
import sys
from pathlib import Path

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
if str(LOGS) not in sys.path:
    sys.path.insert(0, str(LOGS))

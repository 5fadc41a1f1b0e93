"""The terminal UI: ``msdoctor tui [URL] | --run-dir DIR`` (Textual).

Data sources (:mod:`msdoctor.tui.source`) turn the sidecar's ``/api/v1`` into
plain snapshots (:mod:`msdoctor.tui.model`); the app and its widgets only
render snapshots. Importing this package does not import Textual; the app
lives in :mod:`msdoctor.tui.app`.
"""
from msdoctor.tui.model import AlertItem, ChartData, RankRow, Reading, RunSummary
from msdoctor.tui.reader import Request, SourceError

__all__ = ["AlertItem", "ChartData", "RankRow", "Request", "RunSummary", "Reading",
           "SourceError"]

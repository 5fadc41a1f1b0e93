"""The read-only JSON API under ``/api/v1`` (runs, ranks, series, alerts) for the TUI."""
from msdoctor.api.openapi import openapi
from msdoctor.api.routes import Api, Context

__all__ = ["Api", "Context", "openapi"]

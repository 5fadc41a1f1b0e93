"""The event codec and schema as the hooks see them: the one place trainer_hooks imports msdoctor.

``msdoctor.events`` is standard library only (plus optional orjson), so this
import stays cheap inside the training process.
"""
from msdoctor.events import SCHEMA_VERSION, STEP_SIGNALS, EventError, decode, encode, make

__all__ = ["SCHEMA_VERSION", "STEP_SIGNALS", "EventError", "decode", "encode", "make"]

"""The event schema (v1) and its JSON-lines codec: the contract between hooks and sidecar."""
from msdoctor.wire.codec import decode, encode
from msdoctor.wire.schema import (
    EVENT_TYPES,
    SCHEMA_VERSION,
    STEP_SIGNALS,
    EventError,
    make,
    validate,
)

__all__ = ["decode", "encode", "EVENT_TYPES", "SCHEMA_VERSION", "STEP_SIGNALS", "EventError",
           "make", "validate"]

"""The event codec and schema as the hooks see them: the one place trainer_hooks imports msdoctor.

``msdoctor.wire`` is standard library only (plus optional orjson), so this
import stays cheap inside the training process.
"""
from msdoctor.wire import SCHEMA_VERSION, STEP_SIGNALS, EventError, decode, encode, make
from msdoctor.wire.files import NotRegularFile, kind_of, read_regular
from msdoctor.wire.layout import STOP_FILE, rank_file
from msdoctor.wire.numbers import to_wire_list

__all__ = ["SCHEMA_VERSION", "STEP_SIGNALS", "EventError", "decode", "encode", "make", "STOP_FILE",
           "rank_file", "NotRegularFile", "kind_of", "read_regular", "to_wire_list"]

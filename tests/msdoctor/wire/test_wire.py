"""Event schema v1 and its JSON-lines codec (msdoctor.wire)."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, strategies as st

from msdoctor.wire import EVENT_TYPES, EventError, decode, encode, make, validate
from msdoctor.wire.codec import loads


def test_nan_and_inf_survive_a_round_trip_as_json_strings():
    event = make("step", 0, step=7, loss=math.nan, grad_norm=math.inf, lr=-math.inf, tokens=3)
    line = encode(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    on_wire = json.loads(line)                     # plain JSON: no NaN tokens
    assert (on_wire["loss"], on_wire["grad_norm"], on_wire["lr"]) == ("nan", "inf", "-inf")
    back = decode(line)
    assert math.isnan(back["loss"]) and back["grad_norm"] == math.inf and back["lr"] == -math.inf
    assert back["tokens"] == 3 and back["step"] == 7


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_every_float_round_trips_through_encode_and_decode(value):
    back = decode(encode(make("step", 1, step=1, loss=value)))["loss"]
    assert (math.isnan(value) and math.isnan(back)) or back == value


def test_numpy_scalars_and_nested_non_finite_values_are_encoded_safely():
    np = pytest.importorskip("numpy")
    line = encode(make("run_start", 0, config={"lr": np.float32(1e-4), "bad": [float("nan")]},
                       world_size=np.int64(8)))
    back = decode(line)
    assert back["world_size"] == 8 and back["config"]["bad"] == ["nan"]
    assert back["config"]["lr"] == pytest.approx(1e-4)


@pytest.mark.parametrize("event, field, expected", [
    ({"v": 1, "type": "step", "rank": 0, "step": "12"}, "step", "expected an integer, got '12'"),
    ({"v": 1, "type": "step", "rank": 0, "step": 1, "loss": "high"}, "loss",
     'expected a number or one of "nan", "inf", "-inf", got \'high\''),
    ({"v": 1, "type": "step", "rank": 0, "step": 1, "overflow": 1}, "overflow",
     "expected true or false, got 1"),
    ({"v": 1, "type": "run_start", "rank": 0, "config": []}, "config",
     "expected a JSON object, got []"),
    ({"v": 1, "type": "run_end", "rank": 0}, "status", "missing required field 'status'"),
    ({"v": 1, "type": "step", "rank": 1.5, "step": 1}, "rank", "expected an integer, got 1.5"),
    ({"v": 1, "type": "explode", "rank": 0}, "type", "expected one of run_start, step"),
])
def test_a_validation_error_names_the_field_and_the_expected_form(event, field, expected):
    with pytest.raises(EventError) as info:
        validate(event)
    assert info.value.field == field
    assert expected in str(info.value)
    assert repr(field) in str(info.value) or field == "type"


def test_a_wrong_or_missing_schema_version_is_rejected_with_the_version_understood():
    with pytest.raises(EventError, match=r"unsupported schema version 2, this reader understands 1"):
        decode(b'{"v":2,"type":"step","rank":0,"step":1}')
    with pytest.raises(EventError, match=r"missing field 'v': expected schema version 1"):
        decode(b'{"type":"step","rank":0,"step":1}')


def test_unknown_fields_are_kept_as_they_are():
    event = decode(b'{"v":1,"type":"step","rank":0,"step":3,"moe_aux_loss":0.25,"tag":{"a":1}}')
    assert event["moe_aux_loss"] == 0.25 and event["tag"] == {"a": 1}


def test_integral_floats_are_accepted_where_an_integer_is_expected():
    event = decode(b'{"v":1,"type":"step","rank":2.0,"step":10.0}')
    assert event["rank"] == 2 and type(event["step"]) is int


@pytest.mark.parametrize("line, message", [
    (b'{"v":1,"type":"step",', "not valid JSON"),
    (b'\xff\xfe{"v":1}', "not valid UTF-8"),
    (b'[1,2]', "expected a JSON object, got [1, 2]"),
])
def test_bad_json_bad_utf8_and_non_objects_raise_event_error(line, message):
    with pytest.raises(EventError, match=message.replace("[", r"\[").replace("]", r"\]")):
        decode(line)


def test_loads_reports_bad_bytes_as_event_error_not_a_library_exception():
    with pytest.raises(EventError):
        loads(b"{nope}")


def test_a_layers_event_with_an_array_of_the_wrong_length_names_the_field_and_what_was_expected():
    event = make("layers", 0, step=3, names=["layers.0", "layers.1"], grad_norm=[1.0])
    with pytest.raises(EventError, match=r"'grad_norm': 1 entries for 2 layers in 'names'; "
                                         r"expected one entry per layer"):
        validate(event)


def test_a_layers_event_refuses_a_repeated_or_malformed_name_and_a_non_numeric_entry():
    for names, values, wanted in ((["a", "a"], [1, 2], "named twice"),
                                  (["a b"], [1], "not a layer name"),
                                  (["a"], ["x"], "entry 0 is 'x'")):
        with pytest.raises(EventError, match=wanted):
            validate(make("layers", 0, step=3, names=names, grad_norm=values))


def test_a_layers_event_keeps_null_for_not_measured_and_reads_nan_back_as_a_float():
    event = validate(decode(encode(make("layers", 0, step=3, names=["embedding", "layers.0"],
                                        act_max=[None, "nan"]))))
    assert event["act_max"][0] is None and math.isnan(event["act_max"][1])


def test_make_leaves_out_fields_that_are_none():
    event = make("step", 3, step=1, loss=None, lr=1e-4)
    assert event == {"v": 1, "type": "step", "rank": 3, "step": 1, "lr": 1e-4}


def test_every_event_type_built_with_make_round_trips():
    required = {"step": {"step": 1}, "checkpoint": {"step": 1}, "run_end": {"status": "completed"},
                "stop": {"reason": "LossNonFinite"},
                "layers": {"step": 1, "names": ["embedding", "layers.0"], "grad_norm": [1.0, None]}}
    for kind in EVENT_TYPES:
        event = make(kind, 0, t=1.5, **required.get(kind, {}))
        assert decode(encode(event)) == event




def test_the_default_port_is_outside_prometheus_default_port_allocations_and_not_dcgm_exporters():
    from msdoctor.wire.layout import DEFAULT_LISTEN, DEFAULT_URL

    host, port = DEFAULT_LISTEN.rsplit(":", 1)
    assert host == "127.0.0.1" and DEFAULT_URL == f"http://{DEFAULT_LISTEN}"
    assert not 9090 <= int(port) <= 9093 and not 9100 <= int(port) <= 9999   # the list's ranges
    assert int(port) not in (9400, 8082, 6006, 8118, 3000, 4317, 4318, 8888)   # dcgm, npu, TB, msrun

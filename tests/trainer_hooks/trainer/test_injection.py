"""Parsing ``--inject`` and the corrupt shard the data faults use (no MindSpore needed)."""
import numpy as np
import pytest

from trainer_hooks.trainer.injection import CorruptShard, InjectionError, parse


def test_a_comma_separated_spec_parses_into_each_fault():
    inj = parse("nan@300, slow-data@200,lr-high,leak,periodic@50,accum-mismatch")
    assert (inj.nan, inj.slow_data, inj.lr_high, inj.leak, inj.periodic) == (300, 200, True, 4, 50)
    assert inj.accum_mismatch and not inj.loss_scale_low and inj.stall is None
    assert inj.as_config() == {"nan": 300, "slow-data": 200, "leak": 4, "periodic": 50,
                               "lr-high": True, "accum-mismatch": True}


def test_a_slow_data_window_and_a_crash_parse_into_their_steps():
    inj = parse("slow-data@400:3-7,crash@34")
    assert (inj.slow_data, inj.slow_window, inj.crash) == (400, (3, 7), 34)
    assert inj.as_config() == {"slow-data": 400, "crash": 34, "slow-data-steps": [3, 7]}


def test_a_slow_data_window_delays_only_its_steps_batches_once_the_training_got_there():
    from trainer_hooks.trainer.injection import SlowWindow

    window = SlowWindow(0, 3, 7, start=0, patience=0.0)
    window.wait(2)                    # outside: no wait at all
    window.reached(5)
    assert window.done == 5
    window.wait(6)                    # inside, the training is there: MS (here 0) ms


def test_the_preflight_faults_parse_and_are_recorded():
    inj = parse("load-nothing,init-scale@50")
    assert inj.load_nothing and inj.init_scale == 50
    assert inj.as_config() == {"init-scale": 50, "load-nothing": True}
    for spec, why in (("init-scale@1", ">= 2"), ("init-scale", "needs @N"),
                      ("load-nothing@3", "takes no @argument")):
        with pytest.raises(InjectionError, match=why):
            parse(spec)


def test_an_empty_spec_injects_nothing():
    assert not parse("") and parse("").as_config() == {}


@pytest.mark.parametrize("spec, why", [
    ("boom@3", "unknown fault"), ("nan", "nan needs @N"), ("nan@x", "integer >= 1"),
    ("nan@0", "integer >= 1"), ("lr-high@3", "takes no @argument"), ("periodic@1", ">= 2"),
    ("nan@3,nan@4", "given twice"), ("nan@3,", "empty item"), ("hang@-1", "integer"),
    ("slow-data@400:7-3", "1 <= FROM <= TO"), ("slow-data@400:3", "MS:FROM-TO"),
    ("crash@0", "integer >= 1"),
])
def test_a_malformed_spec_is_one_line_naming_it_and_the_valid_forms(spec, why):
    with pytest.raises(InjectionError) as info:
        parse(spec)
    message = str(info.value)
    assert why in message and "\n" not in message
    assert "valid forms: nan@STEP, spike@STEP, periodic@K" in message


def test_the_corrupt_shard_replaces_exactly_the_named_steps():
    shard = CorruptShard(parse("spike@7,periodic@5"), vocab_size=100, window=9, seed=1)
    hits = [step for step in range(1, 21) if shard(step, 0) is not None]
    assert hits == [5, 7, 10, 15, 20]
    window = shard(10, 3)
    assert window.shape == (9,) and window.min() >= 2 and window.max() < 100
    again = CorruptShard(parse("periodic@5"), vocab_size=100, window=9, seed=1)
    assert np.array_equal(again(10, 3), window)


def test_the_slow_data_delay_is_its_floor_or_twice_the_measured_compute_whichever_is_longer():
    from trainer_hooks.trainer.injection import LoaderPace

    pace = LoaderPace(150)
    assert pace.seconds() == pytest.approx(0.150)           # nothing measured yet
    pace.note_compute(0.030)                                # an idle machine: the floor rules
    assert pace.seconds() == pytest.approx(0.150)
    for _ in range(50):
        pace.note_compute(0.130)                            # a loaded machine: 2x the compute
    assert pace.seconds() == pytest.approx(0.260, rel=1e-3)


def test_the_slow_loader_reads_no_further_ahead_than_its_bound_and_gives_up_after_its_patience():
    import time

    from trainer_hooks.trainer.injection import LoaderPace

    pace = LoaderPace(1, patience=0.3)
    for _ in range(pace.AHEAD):
        pace.wait()                                         # read-ahead within the bound
    began = time.monotonic()
    pace.wait()                                             # the training has done nothing
    assert time.monotonic() - began >= 0.3 and pace.served == pace.AHEAD + 1
    pace.done = pace.served                                 # the training caught up
    began = time.monotonic()
    pace.wait()
    assert time.monotonic() - began < 0.25

"""The progress bar: drawn to its stream only when enabled, ending with a newline."""
import io

from msdoctor.replay.progress import ProgressBar


def test_an_enabled_bar_draws_the_share_done_and_ends_the_line():
    stream = io.StringIO()
    bar = ProgressBar(4 << 20, enabled=True, stream=stream)
    bar.update(1 << 20)
    bar.update(3 << 20)
    bar.close()
    text = stream.getvalue()
    assert "\rreading [" in text and "100%" in text and "4/4 MiB" in text and text.endswith("\n")


def test_a_small_input_off_a_terminal_draws_nothing():
    stream = io.StringIO()
    bar = ProgressBar(1 << 20, stream=stream)
    bar.update(1 << 20)
    bar.close()
    assert stream.getvalue() == "" and bar.done == 1 << 20

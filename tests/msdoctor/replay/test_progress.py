"""The replay progress bar: drawn only when enabled, and it reaches the total."""
import io

from msdoctor.replay.progress import MIN_BYTES, ProgressBar


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_forced_bar_off_a_terminal_is_printed_once_at_the_total():
    stream = io.StringIO()
    bar = ProgressBar(4 << 20, enabled=True, stream=stream)
    bar.update(1 << 20)
    bar.update(3 << 20)
    bar.close()
    text = stream.getvalue()
    assert text.count("reading") == 1 and "100%" in text and "4.0/4.0 MiB" in text
    assert text.endswith("\n") and bar.done == 4 << 20


def test_a_large_input_on_a_terminal_draws_the_bar_to_the_end():
    stream = FakeTerminal()
    bar = ProgressBar(MIN_BYTES, stream=stream)
    assert bar.enabled
    bar.update(MIN_BYTES // 2)
    bar.update(MIN_BYTES // 2)
    bar.close()
    text = stream.getvalue()
    assert "reading" in text and "100%" in text and "16.0/16.0 MiB" in text


def test_nothing_is_drawn_without_a_terminal_or_for_a_small_input():
    for stream, total in ((io.StringIO(), MIN_BYTES * 4), (FakeTerminal(), 1 << 20)):
        bar = ProgressBar(total, stream=stream)
        bar.update(total)
        bar.close()
        assert not bar.enabled and stream.getvalue() == "" and bar.done == total

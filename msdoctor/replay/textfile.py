"""Reading a text log in large blocks: universal newlines, bad bytes replaced, progress."""
from __future__ import annotations

import os
from typing import Callable, Iterator, Optional, Tuple

#: Characters per block; a block always ends at a newline (except the file's last one).
BLOCK_CHARS = 8 << 20

Progress = Optional[Callable[[int], None]]


def blocks(path: str, progress: Progress = None, size: int = BLOCK_CHARS
           ) -> Iterator[Tuple[int, str, bool]]:
    """``(first line number (1-based), text, is_last)`` blocks of ``path``.

    Windows line ends become ``\\n``; undecodable bytes become U+FFFD; the text of a
    block ends with ``\\n`` unless it holds the file's unterminated last line.
    ``progress`` is called with the bytes consumed since the previous call.
    """
    line = 1
    carry = ""
    with open(path, "r", encoding="utf-8", errors="replace", newline=None) as handle:
        last_pos = 0
        while True:
            chunk = handle.read(size)
            if progress is not None:
                try:
                    pos = os.lseek(handle.fileno(), 0, os.SEEK_CUR)
                    progress(pos - last_pos)
                    last_pos = pos
                except OSError:
                    pass
            if not chunk:
                if carry:
                    yield line, carry, True
                return
            text = carry + chunk
            cut = text.rfind("\n") + 1
            if cut == 0:
                carry = text
                continue
            body, carry = text[:cut], text[cut:]
            yield line, body, False
            line += body.count("\n")

"""An ``.npz`` written member by member from parts, without joining the parts first.

``np.savez`` takes whole arrays: a snapshot's flat members (~170 MiB at 1024 ranks x 300
steps) would be joined from their thousands of pieces (one copy), then copied again in
16 MiB pieces on their way into the zip. :func:`write_npz` writes each member's ``.npy``
header, then its parts in order: small parts gathered in one reused buffer, large ones
as they are. The file is what ``np.savez`` writes (members stored, not compressed), so
``np.load`` reads it as any ``.npz``.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from typing import IO, List, Mapping, Union

import numpy as np

#: parts smaller than this many bytes are gathered before they are written
GATHER_BYTES = 1 << 20


@dataclass
class Parts:
    """A 1-D member given as parts (any shape, read in C order), cast to ``dtype``."""

    dtype: np.dtype
    parts: List[np.ndarray] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(part.size for part in self.parts)

    def joined(self) -> np.ndarray:
        """The member as one array (what ``np.load`` gives back)."""
        if not self.parts:
            return np.zeros(0, dtype=self.dtype)
        return np.concatenate([p.reshape(-1) for p in self.parts], dtype=self.dtype,
                              casting="unsafe")


def write_npz(fh: IO[bytes], members: Mapping[str, Union[np.ndarray, Parts]]) -> None:
    """Write ``members`` (name -> array, or parts of a 1-D array) to ``fh`` as an ``.npz``."""
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, member in members.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as out:
                if isinstance(member, np.ndarray):
                    np.lib.format.write_array(out, member, allow_pickle=False)
                else:
                    _write_parts(out, member)


def _write_parts(out: IO[bytes], member: Parts) -> None:
    dtype = np.dtype(member.dtype)
    flat = [p.reshape(-1) for p in member.parts]
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": (sum(p.shape[0] for p in flat),)}
    np.lib.format.write_array_header_1_0(out, header)
    room = max(1, GATHER_BYTES // dtype.itemsize)
    stage = np.empty(room, dtype=dtype)
    batch: List[np.ndarray] = []
    held = 0
    for part in flat:
        n = part.shape[0]
        if held + n > room and batch:
            _gathered(out, batch, stage, held)
            batch, held = [], 0
        if n >= room:
            if part.dtype != dtype or not part.flags.c_contiguous:
                part = np.ascontiguousarray(part, dtype=dtype)
            out.write(part.data.cast("B"))
        elif n:
            batch.append(part)
            held += n
    if batch:
        _gathered(out, batch, stage, held)


def _gathered(out: IO[bytes], batch: List[np.ndarray], stage: np.ndarray, held: int) -> None:
    np.concatenate(batch, out=stage[:held], casting="unsafe")
    out.write(stage[:held].data.cast("B"))

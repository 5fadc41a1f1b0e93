"""An .npz written from parts reads back as np.savez of the joined arrays."""
from __future__ import annotations

import zipfile

import numpy as np

from msdoctor.core import npzparts
from msdoctor.core.npzparts import Parts, write_npz


def test_parts_small_and_large_of_several_dtypes_read_back_as_the_joined_arrays(
        tmp_path, monkeypatch):
    monkeypatch.setattr(npzparts, "GATHER_BYTES", 64)     # gathered, flushed and direct writes
    rng = np.random.default_rng(0)
    floats = [rng.random(n) for n in (0, 3, 7, 1, 20, 2, 9)]
    ints = [np.arange(5), np.arange(12, dtype=np.int32).reshape(3, 4), np.array([True, False]),
            np.array([2 ** 63 + 5], dtype=np.uint64), np.arange(30)[::3]]
    members = {"meta": np.frombuffer(b'{"a": 1}', dtype=np.uint8),
               "f": Parts(np.dtype(np.float64), floats), "i": Parts(np.dtype(np.int64), ints),
               "empty": Parts(np.dtype(np.int64)), "table": np.arange(6).reshape(2, 3)}
    path = tmp_path / "x.npz"
    with path.open("wb") as fh:
        write_npz(fh, members)
    with np.load(path, allow_pickle=False) as archive:
        back = {name: archive[name] for name in archive.files}
    assert back["meta"].tobytes() == b'{"a": 1}'
    np.testing.assert_array_equal(back["f"], np.concatenate(floats))
    assert back["i"].dtype == np.int64
    assert back["i"].tolist() == members["i"].joined().tolist()
    assert back["i"].astype(np.uint64)[-11] == 2 ** 63 + 5          # cast back exactly
    assert back["empty"].shape == (0,) and back["table"].tolist() == [[0, 1, 2], [3, 4, 5]]
    with zipfile.ZipFile(path) as archive:
        assert {i.compress_type for i in archive.infolist()} == {zipfile.ZIP_STORED}
        assert archive.testzip() is None                         # every member's CRC holds

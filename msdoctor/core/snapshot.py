"""Persist the sidecar's spool offsets and state together, atomically.

One file, ``<state_dir>/snapshot.npz``: a JSON document (metadata, offsets,
counters, consumer state) plus the ring buffers and the consumers' arrays (the rule
engine's windows) as plain numpy arrays. It is
loaded with ``allow_pickle=False`` and nothing in it is executed: a run
directory is untrusted input. The offsets and the state are written in one
``os.replace``, so after a restart every event after the snapshot is read again
exactly once and none before it.

Each spool file's first and last bytes read are fingerprinted: a snapshot whose spool was
replaced, truncated or removed does not match and is rejected
(:class:`SnapshotError`); the caller then rebuilds from the start of the spool.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from msdoctor.core.heap import collector_paused
from msdoctor.core.npzparts import Parts, write_npz
from msdoctor.core.snapshot_store import SnapshotError, store_from_dict, store_parts
from msdoctor.core.state import Store
from msdoctor.wire.files import FILE_MODE, describe, make_dir, open_regular
from msdoctor.wire.layout import state_dir

FORMAT = "msdoctor-snapshot"
VERSION = 2
#: ...and the versions it reads (1: every array described in the state document)
READS = (1, 2)
FILENAME = "snapshot.npz"
FINGERPRINT_BYTES = 4096


@dataclass
class Snapshot:
    """What a snapshot restores: spool position, state, consumer states."""

    spool: Dict[str, Any]
    store: Store
    consumers: Dict[str, Any] = field(default_factory=dict)
    written: float = 0.0


def default_state_dir(run_dir: os.PathLike | str) -> Path:
    return state_dir(run_dir)


def fingerprint(path: Path, offset: int) -> str:
    """sha256 (hex) of the first and the last 4 KiB of ``path`` before ``offset``."""
    digest = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as fh:
        digest.update(fh.read(min(offset, FINGERPRINT_BYTES)))
        start = max(0, offset - FINGERPRINT_BYTES)
        fh.seek(start)
        digest.update(fh.read(offset - start))
    return digest.hexdigest()


# -- consumer states: JSON values and numpy arrays ------------------------------
ARRAY_TAG = "__ndarray__"
#: every consumer array lives in one of two flat members (thousands of small .npy members
#: would make loading slow: ~0.2 ms each)
BLOBS = {"i": ("consumer_int", np.int64), "f": ("consumer_float", np.float64)}
#: ...and is described by a row of this member: blob (0 int, 1 float), offset, dtype (index in
#: DTYPES), number of dimensions, then MAX_DIMS dimensions (0 past the last). The state
#: document refers to an array by its row: ``{"__ndarray__": row}``.
TABLE = "consumer_arrays"
MAX_DIMS = 4
DTYPES = ("<f8", "<i8", "|b1", "<f4", "<i4", "<u8", "<u4", "<i2", "<u2", "|i1", "|u1", "<f2")
_CODES = {name: code for code, name in enumerate(DTYPES)}
_LEAVES = frozenset({str, int, float, bool, type(None)})
_PAD = tuple((0,) * (MAX_DIMS - n) for n in range(MAX_DIMS + 1))


def split_arrays(doc: Any) -> Tuple[Any, Dict[str, np.ndarray]]:
    """``doc`` with each numpy array replaced by a reference into one of two flat arrays
    (integers, floats), and those arrays: what the snapshot writes as JSON and as ``.npy``.
    An array of another dtype or of more dimensions is described in the document itself."""
    out, parts = split_parts(doc)
    return out, {name: member if isinstance(member, np.ndarray) else member.joined()
                 for name, member in parts.items()}


def split_parts(doc: Any) -> Tuple[Any, Dict[str, Union[np.ndarray, Parts]]]:
    """:func:`split_arrays` with the two flat arrays given as their parts (not joined)."""
    parts = (Parts(np.dtype(BLOBS["i"][1])), Parts(np.dtype(BLOBS["f"][1])))
    sizes = [0, 0]
    rows: List[Tuple[int, ...]] = []
    kinds: Dict[np.dtype, Tuple[int, Optional[int]]] = {}  # dtype -> (blob, DTYPES index)

    def array(value: np.ndarray) -> Dict[str, Any]:
        found = kinds.get(value.dtype)
        if found is None:
            if value.dtype.kind not in "iubf":
                raise TypeError(f"a consumer state holds a {value.dtype} array; only numeric "
                                "arrays can be saved")
            found = kinds[value.dtype] = (int(value.dtype.kind == "f"),
                                          _CODES.get(value.dtype.str))
        blob, code = found
        shape, at = value.shape, sizes[blob]
        if code is None or len(shape) > MAX_DIMS:
            ref: Dict[str, Any] = {ARRAY_TAG: BLOBS["if"[blob]][0], "at": at,
                                   "shape": list(shape), "dtype": value.dtype.str}
        else:
            rows.append((blob, at, code, len(shape)) + shape + _PAD[len(shape)])
            ref = {ARRAY_TAG: len(rows) - 1}
        parts[blob].parts.append(value)
        sizes[blob] = at + value.size
        return ref

    def walk(value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return {k: v if type(v) in _LEAVES else walk(v) for k, v in value.items()}
        if kind is list or kind is tuple:
            return [v if type(v) in _LEAVES else walk(v) for v in value]
        if isinstance(value, np.ndarray):
            return array(value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    out = walk(doc)
    arrays: Dict[str, Union[np.ndarray, Parts]] = {
        BLOBS[b][0]: part for b, part in zip("if", parts) if part.parts}
    if rows:
        arrays[TABLE] = np.array(rows, dtype=np.int64)
    return out, arrays


def join_arrays(doc: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    """Inverse of :func:`split_arrays`; a reference that does not fit its array is a
    :class:`SnapshotError`."""
    names = {name for name, _ in BLOBS.values()}
    table = _table(arrays)
    blobs = [arrays.get(BLOBS["i"][0]), arrays.get(BLOBS["f"][0])]

    def described(ref: Dict[str, Any]) -> np.ndarray:
        name: Any = ref.get(ARRAY_TAG)
        at: Any = ref.get("at")
        shape: Any = ref.get("shape")
        dtype: Any = ref.get("dtype")
        blob = arrays.get(name) if name in names else None
        try:
            kind = np.dtype(dtype).kind
            size = int(np.prod(shape, dtype=np.int64))
            ok = (blob is not None and kind in "iubf" and isinstance(at, int) and at >= 0
                  and all(isinstance(n, int) and n >= 0 for n in shape)
                  and at + size <= blob.shape[0])
        except (TypeError, ValueError):
            ok = False
        if not ok or blob is None:
            raise SnapshotError(f"state refers to {ref!r}, which does not fit the saved arrays")
        return blob[at:at + size].astype(dtype).reshape(shape)

    def array(ref: Dict[str, Any]) -> np.ndarray:
        row = ref[ARRAY_TAG]
        if type(row) is not int:
            return described(ref)
        if table is None or not 0 <= row < table.shape[0] or len(ref) != 1:
            raise SnapshotError(f"state refers to {ref!r}, which does not fit the saved arrays")
        floats, at, code, ndim, *dims = table[row].tolist()
        size = math.prod(dims[:ndim])
        return blobs[floats][at:at + size].astype(DTYPES[code]).reshape(dims[:ndim])

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if ARRAY_TAG in value:
                return array(value)
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(doc)


def _table(arrays: Mapping[str, np.ndarray]) -> Optional[np.ndarray]:
    """The array table, every row checked against the blobs at once (None: there is none)."""
    table = arrays.get(TABLE)
    if table is None:
        return None
    if table.dtype.kind != "i" or table.ndim != 2 or table.shape[1] != 4 + MAX_DIMS:
        raise SnapshotError(f"{TABLE}: expected int rows of {4 + MAX_DIMS}, got "
                            f"{table.dtype}{table.shape}")
    if not table.shape[0]:
        return table
    floats, at, code, ndim, dims = table[:, 0], table[:, 1], table[:, 2], table[:, 3], table[:, 4:]
    lengths = np.array([len(b) if b is not None else -1
                        for b in (arrays.get(BLOBS["i"][0]), arrays.get(BLOBS["f"][0]))])
    used = np.arange(MAX_DIMS)[None, :] < ndim[:, None]
    ok = ((floats >= 0) & (floats <= 1) & (at >= 0) & (code >= 0) & (code < len(DTYPES))
          & (ndim >= 0) & (ndim <= MAX_DIMS) & (dims >= 0).all(axis=1)
          & ((dims == 0) | used).all(axis=1))
    if ok.all():
        sizes = np.where(used, dims, 1).prod(axis=1)
        ok = at + sizes <= lengths[floats]
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        raise SnapshotError(f"{TABLE} row {bad} ({table[bad].tolist()}) does not fit the saved "
                            f"arrays")
    return table


# -- files -------------------------------------------------------------------
def temporary_path(state_dir: Path, pid: int) -> Path:
    """Where process ``pid`` writes the snapshot before renaming it into place."""
    return state_dir / f".{FILENAME}.{pid}.tmp"


@collector_paused()
def save(state_dir: os.PathLike | str, run_dir: os.PathLike | str, spool: Dict[str, Any],
         store: Store, consumers: Optional[Mapping[str, Any]] = None) -> Path:
    """Write the snapshot atomically (temp file + fsync + rename); return its path."""
    state_dir, run_dir = Path(state_dir), Path(run_dir)
    make_dir(state_dir)
    prints = {}
    for rel, entry in spool.get("files", {}).items():
        offset = int(entry["offset"])
        if offset:
            try:
                prints[rel] = fingerprint(run_dir / rel, offset)
            except OSError:                 # not readable now: this snapshot will not match
                prints[rel] = ""
    store_doc, store_arrays = store_parts(store)
    consumer_doc, arrays = split_parts(dict(consumers or {}))
    arrays.update(store_arrays)
    meta = {"format": FORMAT, "version": VERSION, "written": time.time(),
            "spool": spool, "fingerprints": prints, "store": store_doc,
            "consumers": consumer_doc}
    blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    target = state_dir / FILENAME
    tmp = temporary_path(state_dir, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                     FILE_MODE)
        os.fchmod(fd, FILE_MODE)            # whatever the umask
        with os.fdopen(fd, "wb") as fh:
            write_npz(fh, {"meta": blob, **arrays})
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    try:
        dir_fd = os.open(state_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:  # pragma: no cover - some filesystems refuse directory fsync
        pass
    return target


@collector_paused()
def load(state_dir: os.PathLike | str, run_dir: os.PathLike | str,
         capacity: Optional[int] = None) -> Optional[Snapshot]:
    """Read the snapshot, or None when there is none.

    Raises :class:`SnapshotError` when it is unreadable or does not match the
    spool in ``run_dir`` (a file replaced, truncated or gone).
    """
    path = Path(state_dir) / FILENAME
    try:
        fd = open_regular(path, what="a regular file (the snapshot msdoctor serve writes)")
    except FileNotFoundError:
        return None
    except OSError as exc:                  # a FIFO, a device, a directory, a link loop
        raise SnapshotError(f"unreadable: {describe(path, exc)}") from None
    try:
        with os.fdopen(fd, "rb") as fh, np.load(fh, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise SnapshotError(f"{path}: unreadable ({exc}); expected an .npz written by "
                            f"msdoctor serve") from None
    try:
        meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    except (KeyError, ValueError) as exc:
        raise SnapshotError(f"{path}: no readable 'meta' document ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SnapshotError(f"{path}: not an msdoctor snapshot (format "
                            f"{meta.get('format') if isinstance(meta, dict) else None!r})")
    if meta.get("version") not in READS:
        raise SnapshotError(f"{path}: snapshot version {meta.get('version')!r}, "
                            f"this msdoctor reads {' and '.join(map(str, READS))}")
    _check_spool(path, Path(run_dir), meta)
    try:
        store = store_from_dict(meta["store"], arrays, capacity)
    except SnapshotError as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotError(f"{path}: malformed state ({type(exc).__name__}: {exc})") from None
    consumers = meta.get("consumers") if isinstance(meta.get("consumers"), dict) else {}
    try:
        consumers = join_arrays(consumers, arrays)
    except SnapshotError as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    return Snapshot(meta["spool"], store, consumers, float(meta.get("written", 0.0)))


def _check_spool(path: Path, run_dir: Path, meta: Dict[str, Any]) -> None:
    spool, prints = meta.get("spool"), meta.get("fingerprints", {})
    if not isinstance(spool, dict) or not isinstance(spool.get("files"), dict):
        raise SnapshotError(f"{path}: no spool offsets")
    for rel, entry in spool["files"].items():
        file = run_dir / rel
        try:
            offset = int(entry["offset"])
            size = file.stat().st_size
        except FileNotFoundError:
            raise SnapshotError(f"{path}: spool file {file} is gone") from None
        except OSError as exc:
            raise SnapshotError(f"{path}: spool file {file}: {exc.strerror or exc}") from None
        except (KeyError, TypeError, ValueError):
            raise SnapshotError(f"{path}: bad offset entry for {rel!r}") from None
        if size < offset:
            raise SnapshotError(f"{path}: {file} has {size} bytes, fewer than the "
                                f"{offset} already read (truncated or replaced)")
        expected = prints.get(rel)
        try:
            found = fingerprint(file, offset) if offset else expected
        except OSError as exc:
            raise SnapshotError(f"{path}: spool file {file}: {exc.strerror or exc}") from None
        if found != expected:
            raise SnapshotError(f"{path}: {file} does not hold the bytes read before "
                                f"(replaced by another run?)")

"""The corpus pre-tokenized once into a flat binary token file, read back by ``np.memmap``.

Layout of ``tokens.bin``: little-endian ``uint16`` token ids (``uint32`` when the vocabulary needs
it), documents concatenated, each ended by ``<eos>``. ``tokens.json`` beside it records the dtype,
the count, the vocabulary size and the corpus key, and is written last, so a half-written token
file is never taken for a finished one.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, TextIO

import numpy as np

from trainer_hooks.trainer import corpus, tokenizer as bpe

_CHUNK_DOCS = 64
_PROGRESS_EVERY_S = 0.5


@dataclass(frozen=True)
class TokenFile:
    """A finished token file: ``ids`` is a read-only memmap of every token."""

    path: Path
    ids: np.ndarray
    vocab_size: int
    tokenizer_path: Path

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def _dtype_for(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 0xFFFF else np.dtype("<u4")


def _progress(out: TextIO, done: int, total: int, started: float, label: str) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    rate = done / max(time.perf_counter() - started, 1e-9) / 1e6
    out.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] "
              f"{100 * done / max(total, 1):5.1f}% {rate:5.1f} MB/s")
    out.flush()


def write_tokens(path: Path, docs: List[str], tok, progress: TextIO = None) -> int:
    """Tokenize ``docs`` into ``path`` (flat ids, ``<eos>`` after each document); returns the count."""
    dtype = _dtype_for(tok.get_vocab_size())
    total_chars = sum(len(d) for d in docs)
    done, count, started, shown = 0, 0, time.perf_counter(), 0.0
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as out:
        for first in range(0, len(docs), _CHUNK_DOCS):
            chunk = docs[first:first + _CHUNK_DOCS]
            for encoding in tok.encode_batch(chunk):
                ids = np.asarray(encoding.ids + [bpe.EOS_ID], dtype=dtype)
                out.write(ids.tobytes())
                count += ids.size
            done += sum(len(d) for d in chunk)
            now = time.perf_counter()
            if progress is not None and (now - shown >= _PROGRESS_EVERY_S or done == total_chars):
                _progress(progress, done, total_chars, started, f"tokenizing {path.name}")
                shown = now
    if progress is not None:
        progress.write(f"\n{count:,} tokens in {time.perf_counter() - started:.1f}s -> {path}\n")
    os.replace(tmp, path)
    return count


def build(cache_dir: Path, vocab_size: int, max_bytes: int = corpus.DEFAULT_MAX_BYTES,
          root: Path = None, progress: TextIO = sys.stderr) -> TokenFile:
    """The token file for (corpus, vocab size) under ``cache_dir``, built on first use, then reused."""
    key = f"{corpus.fingerprint(root, max_bytes)}-v{vocab_size}"
    folder = Path(cache_dir) / key
    meta_path, bin_path = folder / "tokens.json", folder / "tokens.bin"
    tok_path = folder / "tokenizer.json"
    if not meta_path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        docs = list(corpus.documents(root, max_bytes))
        if not docs:
            raise RuntimeError(f"no readable .py files under {root or corpus.stdlib_dir()}: "
                               "the corpus is the standard library's sources")
        tok = bpe.load_or_train(tok_path, docs, vocab_size)
        count = write_tokens(bin_path, docs, tok, progress)
        meta = {"v": 1, "count": count, "dtype": _dtype_for(vocab_size).str,
                "vocab_size": tok.get_vocab_size(), "corpus": key, "documents": len(docs),
                "chars": sum(len(d) for d in docs), "pad_id": bpe.PAD_ID, "eos_id": bpe.EOS_ID}
        tmp = meta_path.with_name(f".tokens.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, meta_path)
    return open_tokens(folder)


def open_tokens(folder: Path) -> TokenFile:
    """Open a finished token file folder (``tokens.json`` + ``tokens.bin``) as a memmap."""
    meta = json.loads((Path(folder) / "tokens.json").read_text())
    ids = np.memmap(Path(folder) / "tokens.bin", dtype=np.dtype(meta["dtype"]), mode="r",
                    shape=(int(meta["count"]),))
    return TokenFile(Path(folder) / "tokens.bin", ids, int(meta["vocab_size"]),
                     Path(folder) / "tokenizer.json")


def default_cache_dir() -> Path:
    """``$MSDOCTOR_CACHE`` or ``~/.cache/msdoctor``, with a ``data`` subfolder."""
    base = os.environ.get("MSDOCTOR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "msdoctor")
    return Path(base) / "data"

"""A byte-level BPE tokenizer trained offline on the corpus with the ``tokenizers`` package, cached.

Special tokens: ``<pad>`` is id 0 (MindFormers' Llama masks id 0 out of the loss, so it must never
be a real token) and ``<eos>`` is id 1 (ends each document in the token stream).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

PAD, EOS = "<pad>", "<eos>"
PAD_ID, EOS_ID = 0, 1


def train(documents: Iterable[str], vocab_size: int):
    """Train a byte-level BPE of ``vocab_size`` tokens on ``documents``; returns a ``tokenizers.Tokenizer``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(documents, trainer=trainer)
    if tokenizer.token_to_id(PAD) != PAD_ID or tokenizer.token_to_id(EOS) != EOS_ID:
        raise RuntimeError(f"tokenizer special ids moved: {PAD}={tokenizer.token_to_id(PAD)}, "
                           f"{EOS}={tokenizer.token_to_id(EOS)}; expected {PAD_ID} and {EOS_ID}")
    return tokenizer


def load_or_train(path: Path, documents: Iterable[str], vocab_size: int):
    """The tokenizer cached at ``path`` (``tokenizer.json``), trained and saved there on first use."""
    from tokenizers import Tokenizer

    if path.exists():
        return Tokenizer.from_file(str(path))
    tokenizer = train(documents, vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tokenizer.save(str(tmp))
    os.replace(tmp, path)
    return tokenizer

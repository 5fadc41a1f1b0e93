"""The data pipeline: offline corpus and tokenizer, the flat token file, windows, seeded shuffle."""
import json

import numpy as np
import pytest
from tokenizers import Tokenizer

from trainer_hooks.trainer import corpus, tokens
from trainer_hooks.trainer.dataset import WindowSource
from trainer_hooks.trainer.tokenizer import EOS_ID, PAD_ID


def test_the_corpus_is_the_standard_library_read_in_a_stable_order():
    first = list(corpus.documents(max_bytes=200_000))
    again = list(corpus.documents(max_bytes=200_000))
    assert first == again and len(first) > 3
    assert sum(map(len, first)) >= 200_000
    assert any('"""' in doc for doc in first)          # docstrings are in it


def test_the_tokenizer_is_trained_offline_with_pad_0_and_eos_1(token_cache):
    folder = next(token_cache.iterdir())
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert tok.get_vocab_size() == 2048
    assert tok.token_to_id("<pad>") == PAD_ID and tok.token_to_id("<eos>") == EOS_ID
    text = "def add(a, b):\n    return a + b\n"
    assert tok.decode(tok.encode(text).ids) == text


def test_the_token_file_is_flat_uint16_read_by_memmap_and_reused(token_cache):
    folder = next(token_cache.iterdir())
    meta = json.loads((folder / "tokens.json").read_text())
    built = tokens.build(token_cache, 2048, progress=None)          # cached: no rebuild
    assert isinstance(built.ids, np.memmap) and built.ids.dtype == np.uint16
    assert len(built) == meta["count"] > 500_000
    assert (folder / "tokens.bin").stat().st_size == 2 * meta["count"]
    assert int(built.ids.max()) < 2048 and PAD_ID not in set(np.unique(built.ids[:100_000]))
    assert int((built.ids == EOS_ID).sum()) == meta["documents"]


def _source(ids, seed=42, start=0, steps=20, rank=0, world=1):
    return WindowSource(ids, seq_length=64, samples_per_step=8, start_step=start, steps=steps,
                        seed=seed, rank=rank, world=world)


def test_samples_have_a_static_shape_and_follow_a_seeded_shuffle(token_cache):
    ids = tokens.build(token_cache, 2048, progress=None).ids
    a, b, c = _source(ids), _source(ids), _source(ids, seed=7)
    first = [a[i][0] for i in range(len(a))]
    assert {s.shape for s in first} == {(65,)} and first[0].dtype == np.int32
    assert all(np.array_equal(x, b[i][0]) for i, x in enumerate(first))
    assert not all(np.array_equal(x, c[i][0]) for i, x in enumerate(first))
    window = first[3]
    offsets = [a.permutation(0)[slot] * 64 for slot in range(8)]
    assert np.array_equal(window, np.asarray(ids[offsets[3]:offsets[3] + 65], dtype=np.int32))


def test_the_data_offset_is_restorable_from_the_step_alone(token_cache):
    ids = tokens.build(token_cache, 2048, progress=None).ids
    straight, resumed = _source(ids, steps=20), _source(ids, start=10, steps=10)
    for i in range(len(resumed)):
        assert np.array_equal(resumed[i][0], straight[80 + i][0])


def test_ranks_read_disjoint_windows_of_the_same_permutation(token_cache):
    ids = tokens.build(token_cache, 2048, progress=None).ids
    r0, r1 = _source(ids, rank=0, world=2), _source(ids, rank=1, world=2)
    w0 = {r0.sample(g)[:8].tobytes() for g in range(100)}
    w1 = {r1.sample(g)[:8].tobytes() for g in range(100)}
    assert not w0 & w1


@pytest.mark.slow
def test_the_mindspore_pipeline_yields_static_batches_and_drops_the_remainder(token_cache):
    from trainer_hooks.trainer import dataset

    ids = tokens.build(token_cache, 2048, progress=None).ids
    source = WindowSource(ids, 64, 8, 0, 5, 42)
    data = dataset.build(source, batch_size=3, workers=2)         # 40 samples -> 13 batches of 3
    shapes = [tuple(row[0].shape) for row in data.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    assert shapes == [(3, 65)] * 13
    batches = list(dataset.build(source, 8, 2).create_tuple_iterator(num_epochs=1, output_numpy=True))
    assert np.array_equal(batches[2][0][5], source[21][0])

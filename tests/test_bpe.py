"""Tests for zoo.data.bpe: fixed special ids, reversibility on real Multi30k sentences, the tokenizer cache."""

import os
import pickle
import unicodedata
from pathlib import Path

import pytest
import torch

from zoo.data.bpe import (BOS_ID, CLS_ID, EOS_ID, MASK_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, SubwordTokenizer,
                          load_or_train, train_bpe)
from zoo.data.multi30k import read_gz_lines
from zoo.data.resolver import DataError

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"  # ../shared/data
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not available")
TINY = ["a cat sat on the mat", "the dog sat", "a dog and a cat"]


@pytest.fixture(scope="module")
def sentences():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not available")
    m = SHARED / "multi30k"
    return {split: read_gz_lines(m / f"{split}.de.gz") + read_gz_lines(m / f"{split}.en.gz")
            for split in ("train", "val")}


@pytest.fixture(scope="module")
def tok(sentences):
    return SubwordTokenizer(train_bpe(sentences["train"], 1000))


def test_special_ids_fixed():
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID, CLS_ID) == (0, 1, 2, 3, 4, 5)
    assert SPECIAL_TOKENS == ["<pad>", "<s>", "</s>", "<unk>", "<mask>", "<cls>"]
    t = train_bpe(TINY, 100)
    assert [t.token_to_id(s) for s in SPECIAL_TOKENS] == list(range(6))
    with pytest.raises(ValueError):
        train_bpe(TINY, 6)


@needs_shared
def test_round_trip_multi30k(tok, sentences):
    assert tok.vocab_size == 1000
    for split in ("train", "val"):
        texts = sentences[split]
        ids = tok.encode_batch(texts)
        assert all(min(r) > CLS_ID for r in ids)  # no specials added, no UNK: every character was seen
        back = tok.tokenizer.decode_batch(ids, skip_special_tokens=True)
        assert all(b == unicodedata.normalize("NFKC", s) for b, s in zip(back, texts))
        exact = sum(b == s for b, s in zip(back, texts))
        assert exact >= len(texts) - 50  # all but the few with a no-break space (NFKC -> space)
    s = sentences["val"][0]
    assert tok.encode(s) == tok.encode_batch([s])[0]
    assert tok.decode(torch.tensor([BOS_ID, *tok.encode(s), EOS_ID, PAD_ID])) == s  # specials skipped


def test_unknown_characters_become_unk():
    tok = SubwordTokenizer(train_bpe(TINY, 100))
    ids = tok.encode("a cat ☃")
    assert UNK_ID in ids and tok.decode(ids) == "a cat "


def test_state_dict_round_trip():
    tok = SubwordTokenizer(train_bpe(TINY, 100))
    state = pickle.loads(pickle.dumps(tok.state_dict()))
    assert set(state) == {"json"} and isinstance(state["json"], str)
    again = SubwordTokenizer.from_state_dict(state)
    assert again.vocab_size == tok.vocab_size and again.encode("the mat") == tok.encode("the mat")


def test_training_is_deterministic():
    assert train_bpe(TINY * 10, 60).to_str() == train_bpe(TINY * 10, 60).to_str()


def test_load_or_train_caches(tmp_path):
    path = tmp_path / "sub" / "tokenizer.json"
    calls = []

    def texts():
        calls.append(1)
        return TINY * 5

    t1 = load_or_train(path, texts, 30)
    assert path.is_file() and calls == [1] and t1.get_vocab_size() == 30
    assert os.listdir(path.parent) == ["tokenizer.json"]  # atomic save left no temp file
    t2 = load_or_train(path, texts, 30)  # loaded: texts not needed
    assert calls == [1] and t2.to_str() == t1.to_str()
    with pytest.raises(DataError, match="set vocab_size to .*, or point the tokenizer path elsewhere"):
        load_or_train(path, texts, 33)
    wrapped = SubwordTokenizer.build(texts, 30, path)
    assert wrapped.path == path and wrapped.vocab_size == 30


def test_load_or_train_saturated_corpus(tmp_path):
    """A tiny corpus gives fewer tokens than asked; reloading with the same vocab_size is fine."""
    path = tmp_path / "tokenizer.json"
    size = load_or_train(path, lambda: TINY, 1000).get_vocab_size()
    assert size < 1000
    assert load_or_train(path, lambda: TINY, 1000).get_vocab_size() == size
    with pytest.raises(DataError, match="point the tokenizer path"):
        load_or_train(path, lambda: TINY + ["many more new words appear here now"], 1000)


def test_load_or_train_bad_files(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("{not json")
    with pytest.raises(DataError, match="point the tokenizer path"):
        load_or_train(path, lambda: TINY, 100)
    # a tokenizer whose specials are in another order
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    bad = Tokenizer(models.BPE(unk_token="<unk>"))
    bad.pre_tokenizer = pre_tokenizers.Metaspace()
    bad.train_from_iterator(TINY, trainers.BpeTrainer(vocab_size=50, special_tokens=["<unk>", "<pad>"],
                                                      show_progress=False))
    bad.save(str(path))
    with pytest.raises(DataError, match="special token ids"):
        load_or_train(path, lambda: TINY, 50)

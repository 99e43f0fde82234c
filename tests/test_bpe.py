"""Tests for zoo.data.bpe: fixed special ids, reversibility on real Multi30k sentences, the tokenizer cache, the
presets' token ids (unchanged)."""

import hashlib
import os
import pickle
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch
from zoo_run import SHARED_DATA, needs_shared

from zoo.data.bpe import (
    BOS_ID,
    CLS_ID,
    EOS_ID,
    MASK_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    SubwordTokenizer,
    load_or_train,
    train_bpe,
)
from zoo.data.multi30k import read_gz_lines
from zoo.data.resolver import DataError

TINY = ["a cat sat on the mat", "the dog sat", "a dog and a cat"]


@pytest.fixture(scope="module")
def sentences(shared_data):
    m = shared_data / "multi30k"
    return {
        split: read_gz_lines(m / f"{split}.de.gz") + read_gz_lines(m / f"{split}.en.gz") for split in ("train", "val")
    }


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


@pytest.mark.e2e
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
    bad.train_from_iterator(
        TINY, trainers.BpeTrainer(vocab_size=50, special_tokens=["<unk>", "<pad>"], show_progress=False)
    )
    bad.save(str(path))
    with pytest.raises(DataError, match="special token ids"):
        load_or_train(path, lambda: TINY, 50)


def digest(rows) -> str:
    """16 hex digits of SHA-256 over token-id rows (int64 bytes, each row closed by "|")."""
    h = hashlib.sha256()
    for r in rows:
        h.update(np.asarray(r, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()[:16]


@pytest.mark.e2e
@needs_shared
def test_presets_keep_their_token_ids(tmp_path):
    """zoo's own tokenizers give the presets the token ids, tokenizer files and token file names they gave before
    pretrained tokenizer.json files got their own ids (digests recorded with that code): SST-2 and Multi30k
    (BPE 8000), Tiny Shakespeare (char), and TextCorpus BPE on it; model_info gives the fixed ids."""
    from zoo.data.multi30k import Multi30k
    from zoo.data.shakespeare import TinyShakespeare
    from zoo.data.sst2 import SST2
    from zoo.data.text_corpus import TextCorpus

    def file_digest(path) -> str:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]

    kw = dict(mirror=str(SHARED_DATA), data_dir=str(tmp_path))
    sst2 = SST2(tokenizer_path=str(tmp_path / "tok" / "tokenizer.json"), **kw)
    sst2.setup()
    assert {s: digest(getattr(sst2, f"{s}_set").ids) for s in ("train", "val", "test")} == {
        "train": "9b18f1bb47283e47",
        "val": "21acf931d4423033",
        "test": "e95707cd14102d91",
    }
    assert file_digest(sst2.tokenizer.path) == "bde92071fd1344ff"
    info = sst2.model_info()
    assert {k: info[k] for k in ("pad_id", "bos_id", "eos_id")} == {"pad_id": 0, "bos_id": 1, "eos_id": 2}
    m30k = Multi30k(tokenizer_dir=str(tmp_path / "mtok"), **kw)
    m30k.setup()
    got = {
        s: [digest(getattr(getattr(m30k, f"{s}_set"), k)) for k in ("src", "tgt_in", "tgt_out")]
        for s in ("train", "val", "test")
    }
    assert got == {
        "train": ["c15a49143f215f43", "82744a2939aeb69f", "2f49fe1101bce977"],
        "val": ["ed63eeb2986c7e64", "6a31ddfdb6713eac", "ec9d3c8f8a5aeb09"],
        "test": ["7cb0cd5091ae7083", "12b3dfaa59eba882", "44627d287f769073"],
    }
    assert file_digest(m30k.tgt_tokenizer.path) == "c650ca22a5a61cad" and m30k.pad_id == PAD_ID
    chars = TinyShakespeare(**kw)
    chars.setup()
    assert [digest([d[0 : len(d)]]) for d in (chars.train_data, chars.val_data)] == [
        "0ffebc38e7a411df",
        "0b6150d6593d9304",
    ]
    assert chars.token_path.name == "input.txt.char.fb29234c0f158205.all.bin" and "pad_id" not in chars.model_info()
    bpe = TextCorpus(file="tiny_shakespeare/input.txt", tokenizer="bpe", vocab_size=1000, **kw)
    bpe.setup()
    flat = [np.asarray(d[0 : len(d)], dtype=np.int64).tobytes() for d in (bpe.train_data, bpe.val_data)]
    assert [hashlib.sha256(b).hexdigest()[:16] for b in flat] == ["9ab3a8f7f43fc19a", "bb1e463c73646413"]
    assert bpe.token_path.name == "input.txt.bpe.eba0cf3be403eef9.all.bin"

"""Tests for zoo.data.bpe: fixed special ids, reversibility on real Multi30k sentences, the tokenizer cache, the
presets' token ids (a function of their data and settings alone)."""

import hashlib
import os
import pickle
import re
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


def file_digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def presets(kw: dict) -> dict:
    """The presets built from nothing under data_dir=kw["data_dir"]: {name: (datamodule, {what: digest})}, the
    digests of their token ids (per split, and per side for Multi30k) and tokenizer files."""
    from zoo.data.multi30k import Multi30k
    from zoo.data.shakespeare import TinyShakespeare
    from zoo.data.sst2 import SST2
    from zoo.data.text_corpus import TextCorpus

    splits = ("train", "val", "test")
    sst2 = SST2(tokenizer_path=str(Path(kw["data_dir"]) / "tok" / "tokenizer.json"), **kw)
    sst2.setup()
    m30k = Multi30k(tokenizer_dir=str(Path(kw["data_dir"]) / "mtok"), **kw)
    m30k.setup()
    chars = TinyShakespeare(**kw)
    chars.setup()
    bpe = TextCorpus(file="tiny_shakespeare/input.txt", tokenizer="bpe", vocab_size=1000, **kw)
    bpe.setup()
    sides = ("src", "tgt_in", "tgt_out")
    out = {
        "sst2": (sst2, {s: digest(getattr(sst2, f"{s}_set").ids) for s in splits}),
        "m30k": (m30k, {f"{s}/{k}": digest(getattr(getattr(m30k, f"{s}_set"), k)) for s in splits for k in sides}),
    }
    out["sst2"][1]["tokenizer"] = file_digest(sst2.tokenizer.path)
    out["m30k"][1]["tokenizer"] = file_digest(m30k.tgt_tokenizer.path)
    for name, dm in (("chars", chars), ("bpe", bpe)):
        ids = {
            "train": digest([dm.train_data[0 : len(dm.train_data)]]),
            "val": digest([dm.val_data[0 : len(dm.val_data)]]),
        }
        out[name] = (dm, ids | {"file": dm.token_path.name})
    return out


@pytest.mark.e2e
@needs_shared
def test_presets_token_ids_follow_data_and_settings(tmp_path):
    """zoo's own tokenizers give the presets token ids, tokenizer files and token file names that depend on the data
    and the settings alone: built twice from nothing (two data dirs), the same; another split, side, corpus or
    tokenizer setting, another. SST-2 and Multi30k (BPE 8000), Tiny Shakespeare (char), and TextCorpus BPE on it;
    model_info gives the fixed ids."""
    from zoo.data.shakespeare import TinyShakespeare
    from zoo.data.text_corpus import TextCorpus

    kw = dict(mirror=str(SHARED_DATA), data_dir=str(tmp_path / "a"))
    first, again = presets(kw), presets(dict(kw, data_dir=str(tmp_path / "b")))
    for name in first:  # same data, same settings: the same ids, tokenizer files and token file names
        assert first[name][1] == again[name][1], name
        digests = [v for k, v in first[name][1].items() if k not in ("file", "tokenizer")]
        assert len(set(digests)) == len(digests), (name, first[name][1])  # each split (and side) its own ids
    sst2, m30k, chars, bpe = (first[name][0] for name in ("sst2", "m30k", "chars", "bpe"))
    info = sst2.model_info()
    assert {k: info[k] for k in ("pad_id", "bos_id", "eos_id")} == {"pad_id": 0, "bos_id": 1, "eos_id": 2}
    assert first["m30k"][1]["tokenizer"] != first["sst2"][1]["tokenizer"]  # other data, another tokenizer file
    assert m30k.pad_id == PAD_ID
    assert re.fullmatch(r"input\.txt\.char\.[0-9a-f]{16}\.all\.bin", chars.token_path.name), chars.token_path.name
    assert "pad_id" not in chars.model_info()
    assert re.fullmatch(r"input\.txt\.bpe\.[0-9a-f]{16}\.all\.bin", bpe.token_path.name), bpe.token_path.name
    assert chars.token_path.name.split(".")[3] != bpe.token_path.name.split(".")[3]  # another tokenizer, another key
    # other settings: another vocabulary size, another token file (and other ids)
    other = TextCorpus(file="tiny_shakespeare/input.txt", tokenizer="bpe", vocab_size=500, **kw)
    other.setup()
    assert other.token_path.name != bpe.token_path.name
    assert digest([other.train_data[0 : len(other.train_data)]]) != first["bpe"][1]["train"]
    # other data: one character changed in a copy of the text, another token file under the same stem
    text = (SHARED_DATA / "tiny_shakespeare" / "input.txt").read_text(encoding="utf-8")
    copy = tmp_path / "copy" / "input.txt"
    copy.parent.mkdir()
    copy.write_text(text.replace("First", "Fyrst", 1), encoding="utf-8")
    changed = TinyShakespeare(file=str(copy), **kw)
    changed.setup()
    assert changed.token_path.name != chars.token_path.name and changed.token_path.name.startswith("input.txt.char.")
    assert digest([changed.train_data[0 : len(changed.train_data)]]) != first["chars"][1]["train"]

"""Subword (BPE) tokenizer on Hugging Face `tokenizers`, with fixed ids for the special tokens.

The pipeline is NFKC normalization -> Metaspace pre-tokenization (spaces become "▁", a "▁" is prepended to
the text, words are split at "▁") -> BPE with `<unk>` for unseen characters; the Metaspace decoder turns
"▁" back into spaces and drops the leading one. So decode(encode(s)) == s for ordinary text: words
separated by single spaces, no leading space, characters seen in training, and s already in NFKC form
(NFKC maps e.g. a no-break space U+00A0 to a plain space, so only NFKC(s) comes back).

Special tokens come first in the vocabulary, always with these ids: `<pad>`=0, `<s>`=1 (BOS), `</s>`=2 (EOS,
also the separator), `<unk>`=3, `<mask>`=4, `<cls>`=5. encode() adds none of them; the data modules add
what their task needs.
"""

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from zoo.data.resolver import DataError

PAD, BOS, EOS, UNK, MASK, CLS = "<pad>", "<s>", "</s>", "<unk>", "<mask>", "<cls>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK, MASK, CLS]  # id = position in this list
PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID, CLS_ID = range(len(SPECIAL_TOKENS))
MODEL_IDS = {"pad_id": PAD_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}  # the model keys that must hold these ids


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train a BPE tokenizer (NFKC, Metaspace, `<unk>`) on texts, one sentence or document per item.

    Args:
        texts: training text; consumed once.
        vocab_size: target vocabulary size, specials included (> len(SPECIAL_TOKENS)). A small corpus
            can give fewer tokens: every merge it has is learned, then training stops.
    Returns:
        the trained tokenizers.Tokenizer; the special tokens have ids 0..5 (see module docstring).
    Raises:
        ValueError: if vocab_size is too small to hold the special tokens.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size={vocab_size} must be larger than the {len(SPECIAL_TOKENS)} special tokens")
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    check_special_ids(tok, "the trained tokenizer")
    return tok


def train_chars(texts: Iterable[str]) -> Tokenizer:
    """A character-level tokenizer with zoo's special ids: BPE (as train_bpe) with no merges, so each character
    of the NFKC-normalized text (a space as "▁") is one token. Raises ValueError for texts without characters."""
    texts = list(texts)
    normalizer = normalizers.NFKC()
    alphabet = {"\u2581"} | {c for t in texts for c in normalizer.normalize_str(t).replace(" ", "\u2581")}
    if alphabet == {"\u2581"}:
        raise ValueError("no characters to build a character vocabulary from")
    tok = train_bpe(texts, len(SPECIAL_TOKENS) + len(alphabet))
    merges = json.loads(tok.to_str())["model"]["merges"]
    if merges:  # the alphabet was larger than the trainer's: never seen, but a merge would make it subword
        raise ValueError(f"the character vocabulary learned {len(merges)} merges")
    return tok


def check_special_ids(tok: Tokenizer, where: str) -> None:
    """Raise DataError (naming `where`) unless every special token has its fixed id."""
    wrong = {t: tok.token_to_id(t) for i, t in enumerate(SPECIAL_TOKENS) if tok.token_to_id(t) != i}
    if wrong:
        expected = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
        raise DataError(f"{where}: special token ids {wrong} differ from the fixed ids {expected}")


def read_tokenizer(path: Path, fix: str) -> Tokenizer:
    """The tokenizer.json at `path`, its special ids checked. Raises DataError naming the file and `fix` when it
    cannot be read or a special token sits at another id."""
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception on bad JSON
        raise DataError(f"cannot read the tokenizer {path}: {str(e)[:200]}\nFix: {fix}") from None
    check_special_ids(tok, f"tokenizer {path} (fix: {fix})")
    return tok


def load_or_train(path: str | Path, texts_fn: Callable[[], Iterable[str]], vocab_size: int,
                  chars: bool = False) -> Tokenizer:
    """Load the tokenizer saved at `path`, or train one on texts_fn() and save it there.

    The file is a cache keyed by its path only (the datamodules put a digest of the training text and the
    vocabulary size in the name, so other data gets another file). Saving is
    atomic (a temp file in the same folder, then os.replace), so concurrent processes (DDP ranks) and
    interrupted runs never leave a partial file.

    Args:
        path: a tokenizer.json file (its folder is created if needed).
        texts_fn: returns the training text; called only when training.
        vocab_size: the wanted vocabulary size, specials included.
        chars: a character vocabulary (train_chars; vocab_size unused).
    Returns:
        the tokenizers.Tokenizer.
    Raises:
        DataError: if the file cannot be read as a tokenizer, or its vocabulary size or special ids
            differ from the wanted ones (the message names another path or vocab_size as the fix).
    """
    path = Path(path).expanduser()
    if path.is_file():
        tok = read_tokenizer(path, "point the tokenizer path (data.tokenizer_path or data.tokenizer_dir) at another "
                                   "place, and zoo trains a new one there")
        if chars:
            return tok
        have = tok.get_vocab_size()
        # a small corpus saturates below vocab_size: accept the file if retraining would give the same size
        saturated = have < vocab_size and train_bpe(texts_fn(), vocab_size).get_vocab_size() == have
        if have != vocab_size and not saturated:
            raise DataError(f"tokenizer {path} has vocab size {have}, but vocab_size={vocab_size} was asked for; "
                            f"set vocab_size to {have}, or point the tokenizer path elsewhere to train a new one")
        return tok
    tok = train_chars(texts_fn()) if chars else train_bpe(texts_fn(), vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        tok.save(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return tok


class SubwordTokenizer:
    """A tokenizers.Tokenizer with zoo's interface (like CharTokenizer): encode/decode, vocab_size, state_dict.

    Args:
        tokenizer: a tokenizer from train_bpe / load_or_train (special ids are checked).
        path: the file it was loaded from or saved to, if any (informational).
    Raises:
        DataError: if the special tokens do not have their fixed ids.
    """

    def __init__(self, tokenizer: Tokenizer, path: str | Path | None = None):
        check_special_ids(tokenizer, f"tokenizer {path}" if path else "tokenizer")
        self.tokenizer = tokenizer
        self.path = Path(path) if path is not None else None

    @classmethod
    def build(cls, texts_fn: Callable[[], Iterable[str]], vocab_size: int,
              path: str | Path | None = None, chars: bool = False) -> "SubwordTokenizer":
        """load_or_train(path, ...) when path is given, else train_bpe(texts_fn(), ...) (train_chars with
        chars=True) kept in memory only."""
        if path is None:
            return cls(train_chars(texts_fn()) if chars else train_bpe(texts_fn(), vocab_size))
        return cls(load_or_train(path, texts_fn, vocab_size, chars), path)

    @classmethod
    def load(cls, path: str | Path) -> "SubwordTokenizer":
        """A pretrained tokenizer.json, used as it is (never retrained or written). Raises DataError when
        it cannot be read, or its special tokens lack zoo's fixed ids (module docstring)."""
        path = Path(path)
        return cls(read_tokenizer(path, "pass a tokenizer.json zoo trained (its special tokens at the ids above), or "
                                        "data.tokenizer=bpe"), path)

    @classmethod
    def from_state_dict(cls, state: dict) -> "SubwordTokenizer":
        """Rebuild a tokenizer from state_dict() output (e.g. stored in checkpoint hyperparameters)."""
        return cls(Tokenizer.from_str(state["json"]))

    def state_dict(self) -> dict:
        """Return {"json": str}: the whole tokenizer as its JSON text (plain, YAML/pickle-friendly data)."""
        return {"json": self.tokenizer.to_str()}

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of text, without special tokens (unseen characters become UNK_ID)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """encode() for many texts at once (parallel in the Rust library)."""
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids) -> str:
        """Text of token ids (ints, list or 1-D tensor); special tokens, UNK included, are skipped."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def __repr__(self) -> str:
        return f"SubwordTokenizer(vocab_size={self.vocab_size}, path={self.path})"


def tokenizer_from_state(state: dict):
    """The tokenizer a state_dict() describes: CharTokenizer ({"chars"}) or SubwordTokenizer ({"json"}).
    Raises ValueError for anything else."""
    from zoo.data.char_tokenizer import CharTokenizer

    if "chars" in state:
        return CharTokenizer.from_state_dict(state)
    if "json" in state:
        return SubwordTokenizer.from_state_dict(state)
    raise ValueError(f"not a tokenizer state (keys {sorted(state)}; expected 'chars' or 'json')")

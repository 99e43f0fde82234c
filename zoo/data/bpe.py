"""Subword (BPE) tokenizer on Hugging Face `tokenizers`, with fixed ids for the special tokens.

The pipeline is NFKC normalization -> Metaspace pre-tokenization (spaces become "▁", a "▁" is prepended to
the text, words are split at "▁") -> BPE with `<unk>` for unseen characters; the Metaspace decoder turns
"▁" back into spaces and drops the leading one. So decode(encode(s)) == s for ordinary text: words
separated by single spaces, no leading space, characters seen in training, and s already in NFKC form
(NFKC maps e.g. a no-break space U+00A0 to a plain space, so only NFKC(s) comes back).

Special tokens. zoo's own tokenizers (train_bpe, train_chars) put them first, always with these ids: `<pad>`=0,
`<s>`=1 (BOS), `</s>`=2 (EOS, also the separator), `<unk>`=3, `<mask>`=4, `<cls>`=5. A pretrained tokenizer.json
(SubwordTokenizer.load, e.g. BERT's or RoBERTa's) keeps its own ids: each role of ROLES is the first name of
zoo.data.special_ids.ROLE_NAMES[role] among the file's special tokens (unk: else its model's unk_token), or the
token that an override {role: token} names (data.special_tokens in the configs). encode() adds none of them; the
data modules add what their task needs, with the tokenizer's ids (SubwordTokenizer.special_ids).

A pretrained file brings its vocabulary, pipeline and roles only: its padding and truncation settings are
switched off (zoo pads and cuts its batches itself), and an added token its normalizer writes (a Replace such
as \\d+ -> <num>) is matched in the normalized text, so it is one id; a token the normalizer writes and then
changes is refused (zoo.data.tokenizer_pipeline.zoo_pipeline).
"""

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from zoo.data.atomic import atomic_path
from zoo.data.resolver import DataError
from zoo.data.special_ids import ROLE_NAMES, SpecialIds, special_tokens_of
from zoo.data.tokenizer_pipeline import zoo_pipeline

PAD, BOS, EOS, UNK, MASK, CLS = "<pad>", "<s>", "</s>", "<unk>", "<mask>", "<cls>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK, MASK, CLS]  # id = position in this list
PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID, CLS_ID = range(len(SPECIAL_TOKENS))
MODEL_IDS = {"pad_id": PAD_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}  # the model keys that must hold these ids
ROLES = ("pad", "bos", "eos", "unk", "mask", "cls")  # the special tokens' roles, in SPECIAL_TOKENS order
FIXED_IDS = dict(zip(ROLES, range(len(ROLES))))  # role -> id in zoo's own tokenizers


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


def special_roles(tok: Tokenizer, overrides: Mapping | None = None, where: str = "the tokenizer") -> dict[str, int]:
    """{role: id} of the roles (ROLES) the tokenizer has: by ROLE_NAMES among its special tokens (unk: else its
    model's unk_token), then `overrides` ({role: token}, any token of the vocabulary). zoo's own tokenizers
    give FIXED_IDS. Raises DataError naming `where` for an unknown role or a token not in the vocabulary."""
    specials = special_tokens_of(tok)
    roles = {}
    for role in ROLES:
        name = next((n for n in ROLE_NAMES[role] if n in specials), None)
        if name is not None:
            roles[role] = specials[name]
    unk = getattr(tok.model, "unk_token", None)
    if "unk" not in roles and unk and tok.token_to_id(unk) is not None:
        roles["unk"] = tok.token_to_id(unk)
    for role, token in (overrides or {}).items():
        if role not in ROLES:
            raise DataError(f"data.special_tokens.{role}: no such role; the roles are {', '.join(ROLES)}")
        i = tok.token_to_id(str(token))
        if i is None:
            raise DataError(
                f"data.special_tokens.{role}={token!r} is not a token of {where}.\nFix: name one of "
                f"its tokens, e.g. a special one: {', '.join(specials) or '(it has none)'}"
            )
        roles[role] = i
    return roles


def read_tokenizer(path: Path, fix: str, fixed_ids: bool = True) -> Tokenizer:
    """The tokenizer.json at `path`, its special ids checked (fixed_ids: zoo's own). Raises DataError naming the
    file and `fix` when it cannot be read or (fixed_ids) a special token sits at another id."""
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception on bad JSON
        raise DataError(f"cannot read the tokenizer {path}: {str(e)[:200]}\nFix: {fix}") from None
    if fixed_ids:
        check_special_ids(tok, f"tokenizer {path} (fix: {fix})")
    return tok


def load_or_train(
    path: str | Path, texts_fn: Callable[[], Iterable[str]], vocab_size: int, chars: bool = False
) -> Tokenizer:
    """Load the tokenizer saved at `path`, or train one on texts_fn() and save it there.

    The file is a cache keyed by its path only (the datamodules put a digest of the training text and the
    vocabulary size in the name, so other data gets another file). Saving is
    atomic (zoo.data.atomic: a temp file in the same folder, then os.replace), so concurrent processes (DDP ranks) and
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
        tok = read_tokenizer(
            path,
            "point the tokenizer path (data.tokenizer_path or data.tokenizer_dir) at another "
            "place, and zoo trains a new one there",
        )
        if chars:
            return tok
        have = tok.get_vocab_size()
        # a small corpus saturates below vocab_size: accept the file if retraining would give the same size
        saturated = have < vocab_size and train_bpe(texts_fn(), vocab_size).get_vocab_size() == have
        if have != vocab_size and not saturated:
            raise DataError(
                f"tokenizer {path} has vocab size {have}, but vocab_size={vocab_size} was asked for; "
                f"set vocab_size to {have}, or point the tokenizer path elsewhere to train a new one"
            )
        return tok
    tok = train_chars(texts_fn()) if chars else train_bpe(texts_fn(), vocab_size)
    with atomic_path(path) as tmp:
        tok.save(str(tmp))
    return tok


class SubwordTokenizer(SpecialIds):
    """A tokenizers.Tokenizer with zoo's interface (like CharTokenizer): encode/decode, vocab_size, state_dict,
    and its special tokens' ids (SpecialIds: id_of, pad_id, bos_id, eos_id, model_ids).

    Args:
        tokenizer: a tokenizer from train_bpe / load_or_train (zoo's fixed ids), or a pretrained one.
        path: the file it was loaded from or saved to, if any (informational, and named in messages).
        special_tokens: {role: token} overrides of the roles found by name (special_roles).
    The tokenizer is used through zoo_pipeline: no padding or truncation of its own.
    Attributes:
        special_ids: {role: id} of the roles it has (FIXED_IDS for zoo's own tokenizers).
    Raises:
        DataError: for an override of an unknown role or a token not in the vocabulary, or zoo_pipeline's.
    """

    def __init__(self, tokenizer: Tokenizer, path: str | Path | None = None, special_tokens: Mapping | None = None):
        self.path = Path(path) if path is not None else None
        self.tokenizer = zoo_pipeline(tokenizer, self.where)
        self.overrides = {str(k): str(v) for k, v in (special_tokens or {}).items()}
        self.special_ids = special_roles(tokenizer, self.overrides, self.where)
        self._skip = set(self.special_ids.values())  # decode drops them, special added tokens or not

    @property
    def where(self) -> str:
        return f"the tokenizer {self.path}" if self.path else "the tokenizer"

    @classmethod
    def build(
        cls, texts_fn: Callable[[], Iterable[str]], vocab_size: int, path: str | Path | None = None, chars: bool = False
    ) -> "SubwordTokenizer":
        """load_or_train(path, ...) when path is given, else train_bpe(texts_fn(), ...) (train_chars with
        chars=True) kept in memory only. Special ids: zoo's fixed ones (checked)."""
        if path is None:
            return cls(train_chars(texts_fn()) if chars else train_bpe(texts_fn(), vocab_size))
        return cls(load_or_train(path, texts_fn, vocab_size, chars), path)

    @classmethod
    def load(cls, path: str | Path, special_tokens: Mapping | None = None) -> "SubwordTokenizer":
        """A pretrained tokenizer.json (Hugging Face `tokenizers` format, e.g. BERT's or GPT-2's), used as it is
        (never retrained or written), with its own special ids (special_roles; `special_tokens` overrides).
        Raises DataError when it cannot be read, or for a bad override."""
        path = Path(path)
        tok = read_tokenizer(
            path, "pass a tokenizer.json file (Hugging Face tokenizers format), or data.tokenizer=bpe", fixed_ids=False
        )
        return cls(tok, path, special_tokens)

    @classmethod
    def from_state_dict(cls, state: dict) -> "SubwordTokenizer":
        """Rebuild a tokenizer from state_dict() output (e.g. stored in checkpoint hyperparameters)."""
        return cls(Tokenizer.from_str(state["json"]), special_tokens=state.get("special_tokens"))

    def state_dict(self) -> dict:
        """Return {"json": str} (the whole tokenizer as its JSON text), plus "special_tokens" ({role: token})
        when overrides were given: plain, YAML/pickle-friendly data."""
        state = {"json": self.tokenizer.to_str()}
        if self.overrides:
            state["special_tokens"] = dict(self.overrides)
        return state

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of text, without special tokens (unseen characters become the unk id)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """encode() for many texts at once (parallel in the Rust library)."""
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids) -> str:
        """Text of token ids (ints, list or 1-D tensor); special tokens are skipped: the file's special added
        tokens and every role's token (special_ids, UNK included)."""
        return self.tokenizer.decode([i for i in map(int, ids) if i not in self._skip], skip_special_tokens=True)

    def __repr__(self) -> str:
        return f"SubwordTokenizer(vocab_size={self.vocab_size}, path={self.path})"


def configured_ids(
    kind: str,
    special_tokens: Mapping | None,
    needed: Iterable[str],
    distinct: Iterable[str],
    own: dict,
    path_fn,
    user: str = "the data",
) -> dict:
    """The special ids a datamodule's tokenizer setting gives, before any data work (a pretrained file is read,
    nothing else): {"model": {pad_id, bos_id, eos_id} as SubwordTokenizer.model_ids(needed, distinct),
    "roles": {role: id}, "pretrained": the file, or None for zoo's own tokenizers}. kind: char | bpe (zoo's
    own: model ids `own`, FIXED_IDS roles when `own`) | the path of a tokenizer.json, found by path_fn().
    Raises DataError for special_tokens with zoo's own tokenizers, and SubwordTokenizer.model_ids' errors."""
    if kind in ("char", "bpe"):
        if special_tokens:
            raise DataError(
                f"data.special_tokens applies to a pretrained tokenizer.json, not to data.tokenizer={kind} "
                f"(zoo's own, its special ids fixed).\nFix: drop data.special_tokens, or set "
                f"data.tokenizer to the path of a tokenizer.json"
            )
        return {"model": dict(own), "roles": dict(FIXED_IDS) if own else {}, "pretrained": None}
    tok = SubwordTokenizer.load(path_fn(), special_tokens)
    return {"model": tok.model_ids(needed, distinct, user), "roles": dict(tok.special_ids), "pretrained": str(tok.path)}


def tokenizer_from_state(state: dict):
    """The tokenizer a state_dict() describes: CharTokenizer ({"chars"}) or SubwordTokenizer ({"json"}).
    Raises ValueError for anything else."""
    from zoo.data.char_tokenizer import CharTokenizer

    if "chars" in state:
        return CharTokenizer.from_state_dict(state)
    if "json" in state:
        return SubwordTokenizer.from_state_dict(state)
    raise ValueError(f"not a tokenizer state (keys {sorted(state)}; expected 'chars' or 'json')")

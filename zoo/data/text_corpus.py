"""Language modeling on a user's own plain-text corpus, by config alone (conf/data/text_corpus.yaml).

`file` is one text file, a folder (every file under it, recursively), or a glob, less `exclude` patterns;
each file is a document. Several documents are split into train / val by document (val_fraction of them,
seeded), never by a cut through the joined text; a single document is cut at 1 - val_fraction of its tokens
(Tiny Shakespeare's usual split). Line breaks ("\\r\\n", "\\r", "\\n": zoo.data.files.lines' rule) are read as "\\n",
as in Python's text mode; U+2028, U+0085 ... are characters of their line. The corpus is tokenized once, in a
streaming pass (memory: one chunk), into a memory-mapped token file keyed by the documents' contents and the
settings (for a pretrained tokenizer.json, its contents too); windows are drawn from it as TinyShakespeare's.
"""

import hashlib
import json
import os
from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_info

from zoo.data.bpe import MODEL_IDS, SubwordTokenizer, configured_ids, train_bpe
from zoo.data.char_tokenizer import CharTokenizer
from zoo.data.checksums import sha256sum
from zoo.data.documents import doc_text, documents, encode_docs, has_cr
from zoo.data.files.splits import find_tokenizer
from zoo.data.resolver import CORPORA, FILES, DataError, dataset_name, file_entry
from zoo.data.token_file import open_token_file, write_token_file
from zoo.data.windows import FixedWindows, RandomWindows, WindowedDataModule


class TextCorpus(WindowedDataModule):
    """Batches of (x, y) token tensors (batch_size, block_size) long, y = x shifted left by one, from a plain-text
    corpus (module docstring). A training "epoch" is batches_per_epoch batches of windows at pseudo-random
    offsets (zoo.data.windows: resumable exactly); validation reads val_windows fixed, evenly spaced windows.

    Args:
        file: a resolver name, a file, a folder or a glob. exclude: glob patterns of files to leave out.
        encoding: of every document (checked as it is read; an error names the file and line).
        val_fraction: in (0, 1): documents (or, for one document, tokens) for validation. split_seed: which.
        tokenizer: char (one id per character of the corpus) | bpe (trained on the training documents,
            vocab_size) | the path of a pretrained tokenizer.json or its folder (used as it is; no special
            token is needed, the model config takes its pad / bos / eos ids where it has them).
            special_tokens: {role: token} overrides for such a file (zoo.data.bpe.special_roles).
            name: the dataset's name in reports (None = the file setting).
        block_size: context length T; windows have T+1 tokens. batch_size: the global batch (split over DDP
            processes). batches_per_epoch: training batches of an epoch (validation and checkpoint at its end
            unless trainer.val_check_interval says otherwise). val_windows: validation windows.
        num_workers, pin_memory: the DataLoaders'. seed: of the training windows.
        data_dir, mirror: the resolver's (built-in names). token_dir: where token files go (default
            <data_dir>/tokens, data_dir as for the resolver: data_dir, else $ZOO_DATA_DIR, else ./data).
        limit: the first `limit` windows only (zoo.data.limit): training windows are drawn from the first
            limit x block_size + 1 tokens of the training text, and validation scores min(limit, val_windows).
    After setup(): `tokenizer`, `vocab_size`, `train_data` / `val_data` (read-only Tokens views), `docs`
    ({split: documents}), `token_path`.
    Raises DataError at setup for a missing path (the corpus or the tokenizer.json), empty folder or glob, bad
    encoding, a fraction outside (0, 1), or a split shorter than block_size + 1 tokens; at construction for
    special_tokens with tokenizer=char or bpe.
    """

    BATCH = "lm"

    @classmethod
    def config_ids(cls, data) -> dict:
        """The special ids of the data config `data` (a mapping of this class's arguments), read before any data
        work: zoo.data.bpe.configured_ids (char: none; bpe: zoo's fixed ones; a tokenizer.json: its own)."""
        kind = str(data.get("tokenizer") or "char")
        return configured_ids(
            kind,
            data.get("special_tokens"),
            (),
            (),
            MODEL_IDS if kind == "bpe" else {},
            lambda: find_tokenizer(kind, data.get("data_dir"), data.get("mirror")),
            f"data={cls.__name__}",
        )

    def __init__(
        self,
        file: str = "tiny_shakespeare/input.txt",
        exclude=(),
        encoding: str = "utf-8",
        val_fraction: float = 0.1,
        split_seed: int = 0,
        tokenizer: str = "char",
        vocab_size: int = 8000,
        name: str | None = None,
        block_size: int = 256,
        batch_size: int = 64,
        num_workers: int = 0,
        pin_memory: bool = False,
        val_windows: int = 500,
        batches_per_epoch: int = 250,
        seed: int = 1337,
        data_dir=None,
        mirror=None,
        token_dir=None,
        special_tokens: dict | None = None,
        limit: int | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        if not 0.0 < val_fraction < 1.0:
            raise DataError(f"data.val_fraction={val_fraction} must be in (0, 1)")
        if special_tokens and tokenizer in ("char", "bpe"):
            configured_ids(tokenizer, special_tokens, (), (), {}, None)  # DataError: not for zoo's own
        self.kind = tokenizer if tokenizer in ("char", "bpe") else "pretrained"
        self.special_tokens, self.tokenizer_file = special_tokens, None
        self.file, self.exclude, self.encoding, self.val_fraction = file, list(exclude or ()), encoding, val_fraction
        self.split_seed, self.tokenizer_kind, self.vocab_size_wanted, self.name = (
            split_seed,
            tokenizer,
            vocab_size,
            name,
        )
        self.block_size, self.batch_size = block_size, batch_size
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.val_windows, self.seed, self.limit = val_windows, seed, limit
        self.train_windows_per_epoch = batches_per_epoch * batch_size
        self.data_dir, self.mirror = data_dir, mirror
        self.token_dir = Path(token_dir or Path(data_dir or os.environ.get("ZOO_DATA_DIR") or "data") / "tokens")
        self.token_path: Path | None = None
        self.tokenizer = self.vocab_size = None
        self.train_data = self.val_data = None
        self.docs: dict[str, list[Path]] = {}

    def prepare_data(self) -> None:
        """Find (or download) the documents and write the token files (once per node under Lightning)."""
        self._tokens()

    def split_documents(self) -> dict[str, list[Path]]:
        """{"train": [...], "val": [...]} by document; one document: both [it] (cut by tokens at setup)."""
        docs = documents(self.file, self.exclude, self.data_dir, self.mirror)
        if len(docs) == 1:
            return {"train": docs, "val": docs}
        n_val = min(max(1, round(len(docs) * self.val_fraction)), len(docs) - 1)
        order = torch.randperm(len(docs), generator=torch.Generator().manual_seed(self.split_seed)).tolist()
        val = set(order[:n_val])
        return {
            "train": [d for i, d in enumerate(docs) if i not in val],
            "val": [d for i, d in enumerate(docs) if i in val],
        }

    def _key(self) -> str:
        """A digest of the documents' contents and every setting that changes the tokens: a pretrained
        tokenizer's file contents, or zoo's tokenizer kind and vocabulary size."""
        settings = {"tokenizer": self.tokenizer_kind, "vocab": self.vocab_size_wanted}
        if self.kind == "pretrained":
            settings = {"tokenizer": "pretrained", "tokenizer_sha256": sha256sum(self._tokenizer_file())}
        if any(has_cr(d) for docs in self.docs.values() for d in docs):  # tokens of "\r\n" / "\r" breaks: "\n"
            settings["newline"] = "universal"
        h = hashlib.sha256(
            json.dumps({**settings, "val_fraction": self.val_fraction, "encoding": self.encoding}).encode()
        )
        for split, docs in self.docs.items():
            for d in docs:
                h.update(f"{split}:{sha256sum(d)}\n".encode())
        return h.hexdigest()

    def _tokenizer_file(self) -> Path:
        """The pretrained tokenizer.json (zoo.data.files.splits.find_tokenizer; DataError when it is not there)."""
        if self.tokenizer_file is None:
            self.tokenizer_file = find_tokenizer(self.tokenizer_kind, self.data_dir, self.mirror)
        return self.tokenizer_file

    def _build_tokenizer(self):
        """char: every character of the corpus (train and val documents); bpe: trained on the train ones;
        pretrained: the file, as it is (with special_tokens)."""
        if self.kind == "pretrained":
            return SubwordTokenizer.load(self._tokenizer_file(), self.special_tokens)
        if self.tokenizer_kind == "char":
            chars = set()
            for text in doc_text(list(dict.fromkeys(self.docs["train"] + self.docs["val"])), self.encoding):
                chars.update(text)
            return CharTokenizer(sorted(chars))
        return SubwordTokenizer(train_bpe(doc_text(self.docs["train"], self.encoding), self.vocab_size_wanted))

    def _tokens(self, path=None):
        """The token files of the corpus, {"train", "val"} (one "all" file for a single document, cut at setup):
        opened when files of the same key exist, else written in one streaming pass each."""
        self.docs = self.split_documents()
        key = self._key()
        single = self.docs["train"] == self.docs["val"]
        stem = self.docs["train"][0].name if single else "corpus"  # the key, not the name, tells corpora apart
        parts = ("all",) if single else ("train", "val")
        self.token_paths = {p: self.token_dir / f"{stem}.{self.kind}.{key[:16]}.{p}.bin" for p in parts}
        self.token_path = self.token_paths[parts[0]]
        out = {p: open_token_file(self.token_paths[p], source_sha256=key) for p in parts}
        if all(t is not None for t in out.values()):
            return out
        if all(d.stat().st_size == 0 for split in self.docs.values() for d in split):
            where = self.docs["train"][0] if single else f"data.file={self.file}"
            raise DataError(f"{where} is empty: there is no text to train on")
        tok = self._build_tokenizer()
        meta = {"tokenizer": tok.state_dict(), "kind": self.kind, "source": str(self.file)}
        for p in parts:
            try:
                out[p] = write_token_file(
                    self.token_paths[p],
                    encode_docs(tok, self.docs["train" if single else p], self.encoding),
                    tok.vocab_size,
                    source_sha256=key,
                    meta=meta,
                )
            except OSError as e:
                raise DataError(
                    f"cannot write the token file {self.token_paths[p]}: {e}. Set data.token_dir (or "
                    f"data.data_dir) to a writable folder"
                ) from None
            if len(out[p]) == 0:
                raise DataError(
                    f"data.file={self.file}: the {p} documents are empty; add text or lower data.val_fraction"
                )
        return out

    def setup(self, stage: str | None = None) -> None:
        """Tokenize (first use) or open the token files, and split (idempotent). DataError as the class says."""
        if self.train_data is not None:
            return
        files = self._tokens()
        meta = next(iter(files.values())).info["meta"]
        if self.kind == "pretrained":  # the file itself: the token file is keyed by its contents, not overrides
            tok = self._build_tokenizer()
        else:
            tok = (
                CharTokenizer.from_state_dict(meta["tokenizer"])
                if meta.get("kind", "char") == "char"
                else SubwordTokenizer.from_state_dict(meta["tokenizer"])
            )
        if "all" in files:  # one document: the first 1 - val_fraction of its tokens train
            data = files["all"]
            n = int((1 - self.val_fraction) * len(data))
            train_data, val_data = data.view(0, n), data.view(n, len(data))
        else:
            train_data, val_data = files["train"], files["val"]
        for split, d in (("train", train_data), ("val", val_data)):
            if len(d) < self.block_size + 1:
                raise DataError(
                    f"data.file={self.file}: the {split} split has {len(d)} tokens, fewer than "
                    f"data.block_size + 1 = {self.block_size + 1}; use a smaller block_size or more text"
                )
        self.tokenizer, self.vocab_size = tok, tok.vocab_size
        if self.limit is not None:  # the first `limit` windows of the training text
            train_data = train_data.view(0, min(len(train_data), self.limit * self.block_size + 1))
        self.train_set = RandomWindows(train_data, self.block_size, self.train_windows_per_epoch, self.seed)
        self.val_set = FixedWindows(val_data, self.block_size, min(self.val_windows, self.limit or self.val_windows))
        self.train_data, self.val_data = train_data, val_data
        cut = (
            f" (one document: the first {1 - self.val_fraction:g} of its tokens train, the rest val)"
            if "all" in files
            else ""
        )
        rank_zero_info(
            f"{self.name or dataset_name([str(self.file)])}: "
            + "; ".join(
                f"{s} {len(self.docs[s])} document{'s' * (len(self.docs[s]) != 1)}, {len(d)} tokens"
                for s, d in (("train", train_data), ("val", val_data))
            )
            + f"{cut}; tokenizer {self.kind}, vocab {self.vocab_size}"
        )

    def data_info(self) -> dict:
        """The data this module reads (checkpoints, results.json): dataset (`name`, the built-in dataset's
        name, or the file setting resolved), builtin, files {"text": resolver name or path}, documents {split:
        count}, tokenizer {kind (char, bpe or pretrained), file: the token file, vocab_size; path: the
        pretrained tokenizer.json}."""
        self.setup()
        return {
            "dataset": self.name or dataset_name([str(self.file)]),
            "builtin": str(self.file) in FILES or str(self.file) in CORPORA,
            "files": {"text": file_entry(str(self.file))},
            "documents": {s: len(d) for s, d in self.docs.items()},
            "tokenizer": {
                "kind": self.kind,
                "file": str(self.token_path.resolve()),
                "vocab_size": self.vocab_size,
                **({"path": str(self.tokenizer_file)} if self.kind == "pretrained" else {}),
            },
        }

    def model_info(self) -> dict:
        """What the model and task take from the data: vocab_size, the tokenizer's state, seq_len (tokens), and
        for a subword tokenizer pad_id, bos_id, eos_id (SubwordTokenizer.model_ids: none is needed)."""
        self.setup()
        ids = self.tokenizer.model_ids() if isinstance(self.tokenizer, SubwordTokenizer) else {}
        return {
            "vocab_size": self.vocab_size,
            "tokenizer": self.tokenizer.state_dict(),
            "seq_len": self.block_size,
            **ids,
        }

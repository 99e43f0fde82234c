"""Translation from a user's own parallel corpus, by config alone (conf/data/parallel_text.yaml).

Each of train / val / test is a table file (CSV, TSV, JSON Lines, Parquet, read by Hugging Face `datasets`)
with a source and a target column, or {src: FILE, tgt: FILE}, two line-aligned text files (gzip allowed). A
missing val or test split is carved out of train (seeded). src_lang / tgt_lang are free names, kept in the
checkpoint, results.json and the W&B config. Batches are collate_translation dicts under a token budget.
zoo.data.multi30k.Multi30k is this module on the published Multi30k files.
"""

from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_info

from zoo.data.batching import BatchedDataModule, epoch_generator, pack_by_tokens, shuffled
from zoo.data.bpe import MODEL_IDS, PAD_ID, SubwordTokenizer
from zoo.data.parallel_pairs import ParallelPairs
from zoo.data.resolver import DataError
from zoo.data.translation_set import TranslationSet, collate_translation


def _check_sizes(max_len: int, max_tokens: int) -> None:
    """Raise DataError unless max_len >= 2 (BOS/EOS and one token) and max_tokens >= 4."""
    if max_len < 2 or max_tokens < 4:
        raise DataError(f"need data.max_len >= 2 and data.max_tokens >= 4, got {max_len} and {max_tokens}")


class ParallelText(BatchedDataModule, ParallelPairs):
    """Translation batches from parallel files (collate_translation has the keys).

    Training batches: every epoch the training pairs are put in a random order (a function of (seed, epoch))
    and stably sorted by (source length, target length), cut greedily into batches within max_tokens (the
    same cut every epoch, as Lightning needs one length) and the batch order shuffled. Under DDP every process
    takes whole batches (zoo.data.batching). Val and test batches hold pairs sorted by source length.

    Args:
        train, val, test: a table file, or {src: FILE, tgt: FILE}; val / test None = carved out of train
            (val_fraction, test_fraction, in (0, 1); split_seed).
        src_lang, tgt_lang: names of the two sides (any strings, different).
        format, header, delimiter, quoting, encoding: of table files (None = format from the suffix; quoting as
            zoo.data.text_classification.TextClassification's).
        src_column, tgt_column: the two columns of a table (names or 0-based indices; None = src_lang /
            tgt_lang).
        max_tokens, max_len, vocab_size, joint_vocab, num_workers, seed, limit: as zoo.data.multi30k.Multi30k.
        tokenizer: bpe (trained on the training split), char (one token per character), or the path of a
            pretrained tokenizer.json or its folder (both sides), with its own special ids (zoo.data.bpe: pad,
            bos and eos are needed, distinct). special_tokens: {role: token} for such a file, where its token
            names differ.
        tokenizer_dir: where trained tokenizers are saved, named by a digest of their training text (so a
            tokenizer of other data is never reused); None = in memory only.
        truncate: cut sentences longer than max_len (counted) or refuse them.
        data_dir, mirror: the resolver's (built-in names). name: the dataset's name in reports.
        hf_path, hf_name: a Hugging Face dataset (hub id when online, or a local folder of split files) for the
            splits no file is given for; its columns src_column / tgt_column.
        read_test: False: the test split is never read (its files are not opened; a carved one is cut from
            train and dropped; a hub dataset's is dropped unparsed), test_set is None, test_dataloader refuses.
    After setup(): src_tokenizer / tgt_tokenizer, their vocab sizes, `pad_id` (the tokenizer's), `model_ids`
    ({pad_id, bos_id, eos_id}, given to the model), train_set / val_set / test_set.
    Raises DataError at setup for missing files or columns, misaligned files, bad encodings, empty splits,
    fractions outside (0, 1), equal language names, too-long sentences with truncate=false, a tokenizer.json
    without distinct pad, bos and eos tokens (the message names data.special_tokens).
    """

    pad_id = PAD_ID  # zoo's tokenizers'; after setup, the tokenizer's
    special_ids = MODEL_IDS  # the model ids of zoo's own tokenizers (bpe, char); config_ids: of any setting
    SPECIAL_ROLES = DISTINCT_ROLES = ("pad", "bos", "eos")  # the special tokens the batches hold
    collate = staticmethod(collate_translation)  # collate(items, pad_id)
    BATCH = "translation"

    def __init__(
        self,
        train=None,
        val=None,
        test=None,
        src_lang: str = "src",
        tgt_lang: str = "tgt",
        format: str | None = None,
        header: bool = True,
        delimiter: str | None = None,
        quoting: str | None = None,
        encoding: str = "utf-8",
        src_column=None,
        tgt_column=None,
        val_fraction: float = 0.05,
        test_fraction: float = 0.05,
        split_seed: int = 0,
        max_tokens: int = 4096,
        max_len: int = 128,
        vocab_size: int = 8000,
        joint_vocab: bool = True,
        tokenizer: str = "bpe",
        tokenizer_dir: str | None = None,
        truncate: bool = True,
        num_workers: int = 0,
        seed: int = 1337,
        data_dir=None,
        mirror=None,
        limit: int | None = None,
        name: str | None = None,
        hf_path: str | None = None,
        hf_name: str | None = None,
        special_tokens: dict | None = None,
        read_test: bool = True,
    ):
        super().__init__()
        self.save_hyperparameters()
        self._check_args(
            train, val, test, hf_path, tokenizer, special_tokens, (val_fraction, test_fraction), src_lang, tgt_lang
        )
        _check_sizes(max_len, max_tokens)
        self.keep_files(train, val, test, format, header, delimiter, quoting, encoding, data_dir, mirror)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.columns = (src_lang if src_column is None else src_column, tgt_lang if tgt_column is None else tgt_column)
        self.fractions, self.split_seed = {"val": val_fraction, "test": test_fraction}, split_seed
        self.max_tokens, self.max_len, self.vocab_size_wanted = max_tokens, max_len, vocab_size
        self.joint_vocab, self.tokenizer_kind, self.tokenizer_dir = joint_vocab, tokenizer, tokenizer_dir
        self.truncate, self.num_workers, self.seed, self.limit, self.name = truncate, num_workers, seed, limit, name
        self.hf_path, self.hf_name, self.special_tokens, self.read_test = hf_path, hf_name, special_tokens, read_test
        self._init_state()

    def _check_args(self, train, val, test, hf_path, tokenizer, special_tokens, fractions, src_lang, tgt_lang) -> None:
        """The constructor's checks that need no file (check_settings, then distinct language names);
        fractions = (val_fraction, test_fraction). Raises DataError."""
        self.check_settings(
            train,
            hf_path,
            tokenizer,
            special_tokens,
            val,
            test,
            fractions,
            "a table file with two columns, {src: FILE, tgt: FILE}",
        )
        if src_lang == tgt_lang:
            raise DataError(f"data.src_lang and data.tgt_lang are both {src_lang!r}; name the two sides differently")

    def _init_state(self) -> None:
        """What setup() fills in: model_ids (zoo's until then), the three sets (None), and the per-split counts
        and origins of the pairs read."""
        self.model_ids = dict(MODEL_IDS)
        self.train_set = self.val_set = self.test_set = None
        self.skipped: dict[str, int] = {}
        self.truncated: dict[str, int] = {}
        self.carved: dict[str, str] = {}
        # {split: (file(s), an offset, "line" | "row", each kept pair's place less the offset)}: messages
        self.origins: dict[str, tuple[str, int, str, list[int]]] = {}
        self._train_cut: list[int] | None = None

    # ---- setup -----------------------------------------------------------------------------------------
    def tokenizer_for(self, texts: list[str], side: str) -> SubwordTokenizer:
        """The BPE of `side` (joint, or a language), saved under a digest of its training texts and vocabulary
        size (text_digest), so a tokenizer of other data is never reused; or the given tokenizer.json, as it is,
        with special_tokens (tokenizer_of)."""
        place = None
        if self.tokenizer_dir is not None:
            place = lambda key: Path(self.tokenizer_dir).expanduser() / f"tokenizer.{side}.{key}.json"  # noqa: E731
        return self.tokenizer_of(texts, place)

    def setup(self, stage: str | None = None) -> None:
        """Read, check and tokenize the three splits (idempotent); DataError as the class docstring says."""
        if self.train_set is not None:
            return
        data = self.read()
        train_src, train_tgt = data["train"]
        if self.joint_vocab:
            self.src_tokenizer = self.tgt_tokenizer = self.tokenizer_for(train_src + train_tgt, "joint")
        else:
            self.src_tokenizer = self.tokenizer_for(train_src, self.src_lang)
            self.tgt_tokenizer = self.tokenizer_for(train_tgt, self.tgt_lang)
        self.src_vocab_size, self.tgt_vocab_size = self.src_tokenizer.vocab_size, self.tgt_tokenizer.vocab_size
        # both sides: zoo's fixed ids, or the one tokenizer.json
        roles, user = self.SPECIAL_ROLES, f"data={type(self).__name__}"
        self.model_ids = self.tgt_tokenizer.model_ids(roles, roles, user)
        self.pad_id = self.model_ids["pad_id"]
        sets = {split: self._encode_split(split, src, tgt) for split, (src, tgt) in data.items()}
        self.train_set, self.val_set, self.test_set = sets["train"], sets["val"], sets.get("test")
        self.val_srcs, self.val_refs = self.val_set.srcs, self.val_set.refs
        if self.test_set is not None:
            self.test_srcs, self.test_refs = self.test_set.srcs, self.test_set.refs
        rank_zero_info(
            f"{self.dataset_name()} {self.src_lang}->{self.tgt_lang}: "
            f"{', '.join(f'{s} {len(d)}' for s, d in sets.items())} pairs; vocab {self.src_vocab_size}/"
            f"{self.tgt_vocab_size} ({'joint' if self.joint_vocab else 'separate'}); skipped blank pairs "
            f"{self.skipped}; truncated to data.max_len={self.max_len}: {self.truncated}"
            + "".join(f"; {s} = {how}" for s, how in self.carved.items())
        )

    def _encode_split(self, split: str, src: list[str], tgt: list[str]) -> TranslationSet:
        """Tokenize one split's pairs, each side cut to max_len - 1 tokens (BOS / EOS make max_len); counts the
        cut pairs in truncated[split]. Raises DataError for a too-long pair with truncate=false (naming its
        origin), or a pair longer than max_tokens after the cut."""
        body = self.max_len - 1
        src_ids, tgt_ids = self.src_tokenizer.encode_batch(src), self.tgt_tokenizer.encode_batch(tgt)
        long = [i for i, (s, t) in enumerate(zip(src_ids, tgt_ids)) if len(s) > body or len(t) > body]
        if long and not self.truncate:
            raise DataError(
                f"{len(long)} {split} pairs are longer than data.max_len={self.max_len} tokens, the "
                f"first at {self.origin(split, long[0])} ({src[long[0]][:60]!r}).\nFix: raise "
                f"data.max_len (and model.max_len), or set data.truncate=true to cut them"
            )
        self.truncated[split] = len(long)
        dataset = TranslationSet(
            [s[:body] for s in src_ids],
            [t[:body] for t in tgt_ids],
            src,
            tgt,
            self.model_ids["bos_id"],
            self.model_ids["eos_id"],
        )
        longest = max(a + b for a, b in zip(dataset.src_lens, dataset.tgt_lens))
        if longest > self.max_tokens:
            raise DataError(
                f"a {split} pair has {longest} source + target tokens, more than data.max_tokens="
                f"{self.max_tokens}; raise max_tokens or lower max_len={self.max_len}"
            )
        return dataset

    def train_batches(self, epoch: int) -> list[list[int]]:
        """All training batches of `epoch` before rank sharding: a random order (seed, epoch) stably sorted by
        (source, target) length, cut within max_tokens (the same cut every epoch), batch order shuffled."""
        ds = self.train_set
        g = epoch_generator(self.seed, epoch)
        order = sorted(torch.randperm(len(ds), generator=g).tolist(), key=lambda i: (ds.src_lens[i], ds.tgt_lens[i]))
        if self._train_cut is None:
            self._train_cut = [len(b) for b in pack_by_tokens(order, ds.src_lens, ds.tgt_lens, self.max_tokens)]
        batches, start = [], 0
        for size in self._train_cut:
            batches.append(order[start : start + size])
            start += size
        return shuffled(batches, g)

    def eval_batches(self, dataset: TranslationSet) -> list[list[int]]:
        """Token-budget batches of pairs sorted by source length (ties by index)."""
        order = sorted(range(len(dataset)), key=dataset.src_lens.__getitem__)
        return pack_by_tokens(order, dataset.src_lens, dataset.tgt_lens, self.max_tokens)

    # ---- what the run records --------------------------------------------------------------------------
    def model_info(self) -> dict:
        """vocab_size (target), src_vocab_size, the tokenizers' states {"src", "tgt"}, seq_len / src_len, and
        pad_id, bos_id, eos_id (model_ids)."""
        self.setup()
        n = len(self.train_set)
        return {
            "vocab_size": self.tgt_vocab_size,
            "src_vocab_size": self.src_vocab_size,
            "tokenizer": {"src": self.src_tokenizer.state_dict(), "tgt": self.tgt_tokenizer.state_dict()},
            "seq_len": round(sum(len(t) for t in self.train_set.tgt_out) / n),
            "src_len": round(sum(len(t) for t in self.train_set.src) / n),
            **self.model_ids,
        }

    def data_info(self) -> dict:
        """The data this module reads (checkpoints, results.json): dataset, builtin, src_lang, tgt_lang,
        files {split: path, {src, tgt} paths, or the carving}, tokenizer {kind, joint, file, vocab_size,
        src_file, src_vocab_size}."""
        self.setup()
        files = self.files_info()
        return {
            "dataset": self.dataset_name(),
            "builtin": self.builtin,
            "src_lang": self.src_lang,
            "tgt_lang": self.tgt_lang,
            "files": files,
            "tokenizer": {
                "kind": self.tokenizer_kind if self.tokenizer_kind in ("bpe", "char") else "pretrained",
                "joint": self.joint_vocab,
                "file": self.tgt_tokenizer.path and str(self.tgt_tokenizer.path),
                "vocab_size": self.tgt_vocab_size,
                "src_file": self.src_tokenizer.path and str(self.src_tokenizer.path),
                "src_vocab_size": self.src_vocab_size,
            },
        }

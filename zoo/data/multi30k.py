"""Multi30k translation (task 1) as a LightningDataModule, with BPE tokenizers and token-budget batching.

Files (via the resolver): multi30k/{train,val,<test_split>}.{lang}.gz, gzip UTF-8, one sentence a line, the
files of a split line-aligned across languages (train 29,000 / val 1,014 / test_2016_flickr 1,000 lines).
Which languages a split has is read from zoo.data.resolver.FILES (cs is missing from test_2017_*).

Empty-line policy: a pair where either side is blank is skipped and counted in `skipped[split]` (reported
once, at setup); the example index of a split counts the kept pairs only. The published files have none.
"""

import gzip
from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import Dataset

from zoo.data import resolver
from zoo.data.batching import BatchedDataModule, epoch_generator, pack_by_tokens, pad, shuffled
from zoo.data.bpe import BOS_ID, EOS_ID, MODEL_IDS, PAD_ID, SubwordTokenizer
from zoo.data.resolver import DataError, dataset_name, resolve


def split_languages(split: str) -> list[str]:
    """Languages the resolver knows for a Multi30k split, e.g. split_languages("val") == ["cs", "de", "en", "fr"]."""
    prefix = f"multi30k/{split}."
    return sorted(n[len(prefix) : -len(".gz")] for n in resolver.FILES if n.startswith(prefix) and n.endswith(".gz"))


def check_language_pair(splits: list[str], src_lang: str, tgt_lang: str) -> None:
    """Raise DataError unless every split has files for both languages (the message lists what exists)."""
    if src_lang == tgt_lang:
        raise DataError(f"src_lang and tgt_lang are both {src_lang!r}; choose two different languages")
    all_splits = sorted({n.split("/", 1)[1].rsplit(".", 2)[0] for n in resolver.FILES if n.startswith("multi30k/")})
    for split in splits:
        have = split_languages(split)
        if not have:
            raise DataError(f"Multi30k has no split {split!r}; the splits are {all_splits}")
        missing = [lang for lang in (src_lang, tgt_lang) if lang not in have]
        if missing:
            both = [s for s in all_splits if {src_lang, tgt_lang} <= set(split_languages(s))]
            raise DataError(
                f"Multi30k split {split!r} has no {'/'.join(missing)} files: it exists in languages {have}.\n"
                f"Fix: choose src_lang/tgt_lang among {have}"
                + (f", or a test_split with both {src_lang} and {tgt_lang}: {[s for s in both if s.startswith('test')]}"
                   if split not in ("train", "val") else "") + ".")


def read_gz_lines(path: Path) -> list[str]:
    """The lines of a gzip UTF-8 file, split on "\\n" only (a trailing "\\r" removed; no empty last line).

    Raises:
        DataError: if the file is not gzip or not valid UTF-8.
    """
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: not a valid gzip file ({e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(f"{path}: not valid UTF-8 at line {line} ({e.reason})") from None
    lines = text.split("\n")  # not splitlines(): it also splits at U+2028, U+0085, ... and breaks alignment
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


class TranslationSet(Dataset):
    """Token-id rows of a split; item i is (i, src, tgt_in, tgt_out).

    src = encode(source) + [EOS]; tgt_in = [BOS] + encode(target); tgt_out = encode(target) + [EOS].
    `srcs` / `refs` hold the raw source / target lines (no newline), indexed like the examples.
    """

    def __init__(self, src: list[list[int]], tgt: list[list[int]], srcs: list[str], refs: list[str]):
        self.src = [s + [EOS_ID] for s in src]
        self.tgt_in = [[BOS_ID] + t for t in tgt]
        self.tgt_out = [t + [EOS_ID] for t in tgt]
        self.srcs, self.refs = srcs, refs
        self.src_lens = [len(s) for s in self.src]
        self.tgt_lens = [len(t) for t in self.tgt_in]

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int):
        return i, self.src[i], self.tgt_in[i], self.tgt_out[i]


def collate_translation(items) -> dict[str, torch.Tensor]:
    """Pad (index, src, tgt_in, tgt_out) items with PAD_ID: "src" (B, S), "src_key_padding_mask" (B, S),
    "tgt_in" / "tgt_out" (B, T), "tgt_key_padding_mask" (B, T) (bool, True = padding), "index" (B,) long."""
    index, src, tgt_in, tgt_out = zip(*items)
    src, src_mask = pad(src, PAD_ID)
    tgt_in, tgt_mask = pad(tgt_in, PAD_ID)
    tgt_out, _ = pad(tgt_out, PAD_ID)
    return {"src": src, "src_key_padding_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out,
            "tgt_key_padding_mask": tgt_mask, "index": torch.tensor(index, dtype=torch.long)}


class Multi30k(BatchedDataModule):
    """Multi30k translation src_lang -> tgt_lang: batches of padded source and target token ids.

    Batches are dicts (see collate_translation) with at most max_tokens tokens: B * (S + T) <= max_tokens,
    padding included (S, T: the longest source / target row of the batch).

    Training batches: every epoch the training pairs are put in a random order (a function of (seed,
    epoch)) and stably sorted by (source length, target length), so only pairs of equal lengths trade
    places; this order is cut greedily into batches within the token budget and the batch order is
    shuffled. The length sequence is the same every epoch, so the cut is too: every epoch has the same
    number of batches with the same shapes, which Lightning needs (it reads len() once and validates at the
    epoch's last batch); the batches' members and order change. Under DDP every process takes whole batches
    (rank::world_size, after cutting the list to a multiple of world_size); the epoch and a resumed run's
    position are read from the trainer (see zoo.data.batching); use Trainer(use_distributed_sampler=False).
    Val and test batches hold pairs sorted by source length (ties by index) under the same token budget,
    not shuffled; every process gets all of them.

    Args:
        src_lang, tgt_lang: languages, e.g. "de", "en", "fr", "cs" (cs lacks the test_2017 splits).
        max_tokens: token budget of a batch, source + target, padding included (fairseq's --max-tokens).
        max_len: most tokens in a source or target row (EOS / BOS included); longer sentences are cut
            (counted per split in `truncated`, pairs with either side cut).
        vocab_size: BPE vocabulary size of each tokenizer, special tokens included.
        joint_vocab: one tokenizer trained on the training sentences of both languages; else one per
            language, each trained on its side of the training data.
        tokenizer_dir: folder for the tokenizer files (tokenizer.<a>+<b>.json when joint, with a, b the
            languages in sorted order; else tokenizer.<lang>.json), loaded if present, else trained and
            saved; None: train in memory only. The files are caches keyed by name: delete them when the
            data (e.g. limit) changes.
        test_split: the test set: test_2016_flickr (the standard one), test_2017_flickr, test_2017_mscoco
            or test_2018_flickr.
        num_workers: DataLoader worker processes.
        seed: seed of the training order.
        data_dir, mirror: passed to zoo.data.resolver.resolve.
        limit: keep only the first `limit` training pairs (None: all); for quick runs and tests.

    After setup(): `src_tokenizer`, `tgt_tokenizer` (the same SubwordTokenizer when joint), `src_vocab_size`,
    `tgt_vocab_size`, `pad_id`, `train_set` / `val_set` / `test_set` (TranslationSet), `val_srcs`, `val_refs`,
    `test_srcs`, `test_refs` (raw strings indexed by the batches' "index"), `skipped`, `truncated`.
    """

    pad_id = PAD_ID
    special_ids = MODEL_IDS  # model.pad_id / bos_id / eos_id must equal these (zoo.train.check_config)
    collate = staticmethod(collate_translation)

    def __init__(self, src_lang: str = "de", tgt_lang: str = "en", max_tokens: int = 4096, max_len: int = 256,
                 vocab_size: int = 8000, joint_vocab: bool = True, tokenizer_dir: str | None = None,
                 test_split: str = "test_2016_flickr", num_workers: int = 0, seed: int = 1337,
                 data_dir=None, mirror=None, limit: int | None = None):
        super().__init__()
        self.save_hyperparameters()
        if max_len < 2:
            raise ValueError(f"max_len must be >= 2, got {max_len}")
        if max_tokens < 4:
            raise ValueError(f"max_tokens must be >= 4, got {max_tokens}")
        self.src_lang, self.tgt_lang, self.test_split = src_lang, tgt_lang, test_split
        self.splits = {"train": "train", "val": "val", "test": test_split}
        check_language_pair(list(self.splits.values()), src_lang, tgt_lang)
        self.max_tokens, self.max_len, self.vocab_size_wanted = max_tokens, max_len, vocab_size
        self.joint_vocab, self.tokenizer_dir = joint_vocab, tokenizer_dir
        self.num_workers, self.seed = num_workers, seed
        self.data_dir, self.mirror, self.limit = data_dir, mirror, limit
        self.src_tokenizer: SubwordTokenizer | None = None
        self.tgt_tokenizer: SubwordTokenizer | None = None
        self.src_vocab_size: int | None = None
        self.tgt_vocab_size: int | None = None
        self.skipped: dict[str, int] = {}
        self.truncated: dict[str, int] = {}
        self.train_set = self.val_set = self.test_set = None
        self.val_srcs = self.val_refs = self.test_srcs = self.test_refs = None
        self._train_cut: list[int] | None = None  # batch sizes of the training cut (the same every epoch)

    def file_name(self, split: str, lang: str) -> str:
        return f"multi30k/{self.splits[split]}.{lang}.gz"

    def prepare_data(self) -> None:
        """Find or download the six files (runs once per node under Lightning)."""
        for split in self.splits:
            for lang in (self.src_lang, self.tgt_lang):
                resolve(self.file_name(split, lang), self.data_dir, self.mirror)

    def read_split(self, split: str) -> tuple[list[str], list[str]]:
        """The (source, target) raw lines of a split with blank pairs dropped (counted in skipped[split]).

        Raises:
            DataError: if a file cannot be resolved or read, or the two files differ in line count.
        """
        paths = [resolve(self.file_name(split, lang), self.data_dir, self.mirror)
                 for lang in (self.src_lang, self.tgt_lang)]
        src, tgt = (read_gz_lines(p) for p in paths)
        if len(src) != len(tgt):
            raise DataError(f"parallel files differ in length: {paths[0]} has {len(src)} lines, "
                            f"{paths[1]} has {len(tgt)} lines; they must be line-aligned")
        keep = [i for i in range(len(src)) if src[i].strip() and tgt[i].strip()]
        self.skipped[split] = len(src) - len(keep)
        return [src[i] for i in keep], [tgt[i] for i in keep]

    def tokenizer_path(self, *langs: str) -> Path | None:
        if self.tokenizer_dir is None:
            return None
        return Path(self.tokenizer_dir).expanduser() / f"tokenizer.{'+'.join(sorted(langs))}.json"

    def setup(self, stage: str | None = None) -> None:
        """Read, check and tokenize the three splits (training the tokenizers if needed). Idempotent.

        Raises:
            DataError: if a file cannot be resolved or read, parallel files differ in length, a split
                has no pairs, a saved tokenizer does not match vocab_size, or one pair alone exceeds
                max_tokens.
        """
        if self.train_set is not None:
            return
        data = {}
        for split in self.splits:
            src, tgt = self.read_split(split)
            if split == "train" and self.limit is not None:
                src, tgt = src[: self.limit], tgt[: self.limit]
            if not src:
                raise DataError(f"the Multi30k {self.splits[split]} split has no {self.src_lang}-{self.tgt_lang} pairs")
            data[split] = (src, tgt)
        train_src, train_tgt = data["train"]
        vs = self.vocab_size_wanted
        if self.joint_vocab:
            path = self.tokenizer_path(self.src_lang, self.tgt_lang)
            self.src_tokenizer = self.tgt_tokenizer = SubwordTokenizer.build(lambda: train_src + train_tgt, vs, path)
        else:
            self.src_tokenizer = SubwordTokenizer.build(lambda: train_src, vs, self.tokenizer_path(self.src_lang))
            self.tgt_tokenizer = SubwordTokenizer.build(lambda: train_tgt, vs, self.tokenizer_path(self.tgt_lang))
        self.src_vocab_size, self.tgt_vocab_size = self.src_tokenizer.vocab_size, self.tgt_tokenizer.vocab_size
        sets, body = {}, self.max_len - 1
        for split, (src, tgt) in data.items():
            src_ids, tgt_ids = self.src_tokenizer.encode_batch(src), self.tgt_tokenizer.encode_batch(tgt)
            self.truncated[split] = sum(len(s) > body or len(t) > body for s, t in zip(src_ids, tgt_ids))
            sets[split] = TranslationSet([s[:body] for s in src_ids], [t[:body] for t in tgt_ids], src, tgt)
            longest = max(a + b for a, b in zip(sets[split].src_lens, sets[split].tgt_lens))
            if longest > self.max_tokens:
                raise DataError(f"a {split} pair has {longest} source + target tokens, more than max_tokens="
                                f"{self.max_tokens}; raise max_tokens or lower max_len={self.max_len}")
        self.train_set, self.val_set, self.test_set = sets["train"], sets["val"], sets["test"]
        self.val_srcs, self.val_refs = self.val_set.srcs, self.val_set.refs
        self.test_srcs, self.test_refs = self.test_set.srcs, self.test_set.refs
        rank_zero_info(f"Multi30k {self.src_lang}->{self.tgt_lang}: "
                       f"{', '.join(f'{s} {len(d)}' for s, d in sets.items())} pairs (test = {self.test_split}); "
                       f"vocab {self.src_vocab_size}/{self.tgt_vocab_size} "
                       f"({'joint' if self.joint_vocab else 'separate'}); "
                       f"skipped blank pairs {self.skipped}; truncated to max_len={self.max_len}: {self.truncated}")

    def _length_order(self, dataset: TranslationSet, order: list[int]) -> list[int]:
        """`order` stably sorted by (source length, target length)."""
        return sorted(order, key=lambda i: (dataset.src_lens[i], dataset.tgt_lens[i]))

    def train_batches(self, epoch: int) -> list[list[int]]:
        """All training batches (lists of example indices) of `epoch`, in order, before rank sharding."""
        ds = self.train_set
        g = epoch_generator(self.seed, epoch)
        order = self._length_order(ds, torch.randperm(len(ds), generator=g).tolist())
        if self._train_cut is None:  # depends only on the sorted length sequence: the same every epoch
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

    def model_info(self) -> dict:
        """What the model and task take from the data: vocab_size (target), src_vocab_size, the tokenizers'
        states {"src", "tgt"}, seq_len / src_len (mean training target / source lengths in tokens)."""
        self.setup()
        n = len(self.train_set)
        return {"vocab_size": self.tgt_vocab_size, "src_vocab_size": self.src_vocab_size,
                "tokenizer": {"src": self.src_tokenizer.state_dict(), "tgt": self.tgt_tokenizer.state_dict()},
                "seq_len": round(sum(len(t) for t in self.train_set.tgt_out) / n),
                "src_len": round(sum(len(t) for t in self.train_set.src) / n)}

    def data_info(self) -> dict:
        """The data this module reads, as plain data (kept in checkpoints and results.json): dataset
        ("multi30k"), builtin, src_lang, tgt_lang, test_split, files {"<split>.<lang>": resolver name},
        tokenizer {kind: "bpe", joint, file / vocab_size (the target's), src_file / src_vocab_size}; a
        file is the resolved path of the tokenizer's file, or None when it lives in memory only."""
        self.setup()
        files = {f"{split}.{lang}": self.file_name(split, lang) for split in self.splits
                 for lang in (self.src_lang, self.tgt_lang)}

        def where(*langs):
            path = self.tokenizer_path(*langs)
            return None if path is None else str(path.resolve())
        src, tgt = ((self.src_lang, self.tgt_lang),) * 2 if self.joint_vocab else ((self.src_lang,), (self.tgt_lang,))
        return {"dataset": dataset_name(files.values()), "builtin": True, "src_lang": self.src_lang,
                "tgt_lang": self.tgt_lang, "test_split": self.test_split, "files": files,
                "tokenizer": {"kind": "bpe", "joint": self.joint_vocab, "file": where(*tgt),
                              "vocab_size": self.tgt_vocab_size, "src_file": where(*src),
                              "src_vocab_size": self.src_vocab_size}}

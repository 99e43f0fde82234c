"""Multi30k translation (task 1): zoo.data.parallel_text.ParallelText on the published files.

Files (via the resolver): multi30k/{train,val,<test_split>}.{lang}.gz, gzip UTF-8, one sentence a line, the
files of a split line-aligned across languages (train 29,000 / val 1,014 / test_2016_flickr 1,000 lines).
Which languages a split has is read from zoo.data.resolver.FILES (cs is missing from test_2017_*).

Empty-line policy: a pair where either side is blank is skipped and counted in `skipped[split]` (reported
once, at setup); the example index of a split counts the kept pairs only. The published files have none.
"""

from pathlib import Path

from zoo.data import resolver
from zoo.data.parallel_pairs import aligned_lines
from zoo.data.parallel_text import ParallelText
from zoo.data.resolver import DataError
from zoo.data.translation_set import TranslationSet, collate_translation


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
                + (
                    f", or a test_split with both {src_lang} and {tgt_lang}: "
                    f"{[s for s in both if s.startswith('test')]}"
                    if split not in ("train", "val")
                    else ""
                )
                + "."
            )


def read_gz_lines(path: Path) -> list[str]:
    """The lines of a gzip UTF-8 file, split at "\\r\\n", "\\r" and "\\n" only (zoo.data.parallel_pairs.aligned_lines).
    Raises DataError if the file is not gzip or not valid UTF-8."""
    return aligned_lines(path)


class Multi30k(ParallelText):
    """Multi30k translation src_lang -> tgt_lang: ParallelText over multi30k/{train,val,<test_split>}.{lang}.gz
    (via the resolver), with a language pair checked against the files that exist. Batches, splits and
    tokenizers: ParallelText's.

    Args:
        src_lang, tgt_lang: languages, e.g. "de", "en", "fr", "cs" (cs lacks the test_2017 splits).
        test_split: the test set: test_2016_flickr (the standard one), test_2017_flickr, test_2017_mscoco
            or test_2018_flickr.
        max_tokens, max_len, vocab_size, joint_vocab, tokenizer_dir, num_workers, seed, data_dir, mirror,
            limit, read_test: ParallelText's (read_test=False: the test_split files are never found or read).
    Raises DataError for a language pair or test split without files (the message lists what exists).
    """

    def __init__(
        self,
        src_lang: str = "de",
        tgt_lang: str = "en",
        max_tokens: int = 4096,
        max_len: int = 256,
        vocab_size: int = 8000,
        joint_vocab: bool = True,
        tokenizer_dir: str | None = None,
        test_split: str = "test_2016_flickr",
        num_workers: int = 0,
        seed: int = 1337,
        data_dir=None,
        mirror=None,
        limit: int | None = None,
        tokenizer: str = "bpe",
        special_tokens: dict | None = None,
        read_test: bool = True,
    ):
        splits = {"train": "train", "val": "val", "test": test_split}
        check_language_pair(list(splits.values()), src_lang, tgt_lang)
        files = {
            split: {"src": f"multi30k/{name}.{src_lang}.gz", "tgt": f"multi30k/{name}.{tgt_lang}.gz"}
            for split, name in splits.items()
        }
        super().__init__(
            **files,
            tokenizer=tokenizer,
            special_tokens=special_tokens,
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            max_tokens=max_tokens,
            max_len=max_len,
            vocab_size=vocab_size,
            joint_vocab=joint_vocab,
            tokenizer_dir=tokenizer_dir,
            num_workers=num_workers,
            seed=seed,
            data_dir=data_dir,
            mirror=mirror,
            limit=limit,
            read_test=read_test,
        )
        self.splits, self.test_split = splits, test_split

    def file_name(self, split: str, lang: str) -> str:
        return f"multi30k/{self.splits[split]}.{lang}.gz"

    def prepare_data(self) -> None:
        """Find or download the six files (runs once per node under Lightning); not the test files with
        read_test=False."""
        for split in (s for s in self.splits if s not in self.unread()):
            for lang in (self.src_lang, self.tgt_lang):
                resolver.resolve(self.file_name(split, lang), self.data_dir, self.mirror)

    def data_info(self) -> dict:
        """ParallelText's, with test_split and files {"<split>.<lang>": resolver name}."""
        info = super().data_info()
        files = {
            f"{split}.{lang}": self.file_name(split, lang)
            for split in self.splits
            if split not in self.unread()
            for lang in (self.src_lang, self.tgt_lang)
        }
        return {**info, "test_split": self.test_split, "files": files}


__all__ = [
    "Multi30k",
    "TranslationSet",
    "collate_translation",
    "read_gz_lines",
    "check_language_pair",
    "split_languages",
    "DataError",
]

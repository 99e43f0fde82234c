"""The documents of a plain-text corpus (a file, a folder, a glob, a built-in corpus) and their text, read by
zoo.data.files.lines' rule and tokenized chunk by chunk: what zoo.data.text_corpus.TextCorpus writes its token files
from."""

import fnmatch
import glob as globlib
from pathlib import Path

import numpy as np

from zoo.data.char_tokenizer import CharTokenizer
from zoo.data.files.lines import text_chunks as file_chunks
from zoo.data.resolver import CORPORA, FILES, DataError, corpus_files, locate

CHUNK = 1 << 22  # bytes read and tokenized at a time


def _excluded_name(name: str, exclude) -> bool:
    return any(fnmatch.fnmatch(name.split("/", 1)[1], pat) for pat in exclude)


def documents(spec: str, exclude=(), data_dir=None, mirror=None) -> list[Path]:
    """The documents of `spec`: a built-in corpus (zoo.data.resolver.CORPORA: its files by name, each
    checksummed), a resolver name or a file (one document), a folder (its files, recursively),
    or a glob; sorted, less those whose path relative to the folder / glob root, or name, matches a pattern
    of `exclude`. Raises DataError for a missing path, an empty folder or glob, or everything excluded."""
    spec = str(spec)
    if spec in CORPORA:  # a built-in corpus: each of its files found and checksummed by the resolver
        return [locate(name, data_dir, mirror) for name in corpus_files(spec) if not _excluded_name(name, exclude)]
    if spec in FILES or Path(spec).expanduser().is_file():
        return [locate(spec, data_dir, mirror)]
    root = Path(spec).expanduser()
    if root.is_dir():
        found = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
        base = root
    elif any(c in spec for c in "*?["):
        found = sorted(Path(p) for p in globlib.glob(str(root), recursive=True) if Path(p).is_file())
        base = Path(globlib.escape(str(root)).split("*")[0]).parent if found else root.parent
        if not found:
            raise DataError(f"data.file={spec}: the glob matches no file.\nFix: check the pattern (** matches folders)")
    else:
        return [locate(spec, data_dir, mirror)]  # "not found: PATH"
    if not found:
        raise DataError(f"data.file={spec}: the folder {root.resolve()} has no files")

    def excluded(p: Path) -> bool:
        rel = str(p.relative_to(base)) if p.is_relative_to(base) else p.name
        return any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(p.name, pat) for pat in exclude)

    kept = [p.resolve() for p in found if not excluded(p)]
    if not kept:
        raise DataError(f"data.file={spec}: data.exclude={list(exclude)} leaves none of its {len(found)} files")
    return kept


def text_chunks(path: Path, encoding: str = "utf-8", chunk: int = CHUNK):
    """The decoded text of a file, chunk by chunk (memory: one chunk), each line break ("\\r\\n", "\\r", "\\n": the
    one rule of zoo.data.files.lines) as "\\n". Raises DataError naming the file and line of the first undecodable
    byte."""
    return file_chunks(
        path,
        encoding,
        chunk,
        f"convert the file to {encoding.upper()} (with data=text_corpus, data.encoding names another encoding "
        f"and data.exclude leaves a file out)",
    )


def has_cr(path: Path, chunk: int = CHUNK) -> bool:
    """Whether the file holds a carriage return byte (a line break the token file writes as "\\n")."""
    with open(path, "rb") as f:
        while block := f.read(chunk):
            if b"\r" in block:
                return True
    return False


def char_ids(text: str, codepoints: np.ndarray) -> np.ndarray:
    """Ids of the characters of `text` in the sorted code point table `codepoints` (CharTokenizer order)."""
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    return np.searchsorted(codepoints, cps).astype(np.int64)


def doc_text(docs: list[Path], encoding: str = "utf-8"):
    """The text of the documents, chunk by chunk (text_chunks); documents of a corpus end with a newline ("\\n" is
    added to one of several that lacks it), so two never run into one word."""
    single = len(docs) == 1
    for d in docs:
        last = ""
        for text in text_chunks(d, encoding):
            last = text
            yield text
        if not single and last and not last.endswith("\n"):
            yield "\n"


def encode_docs(tokenizer, docs: list[Path], encoding: str = "utf-8"):
    """Token id arrays of the documents' text (doc_text), chunk by chunk: a CharTokenizer's by its code point
    table (char_ids), another tokenizer's of whole lines only (a chunk boundary never cuts a word)."""
    if isinstance(tokenizer, CharTokenizer):
        table = np.array(sorted(ord(c) for c in tokenizer.chars), dtype=np.uint32)
        for text in doc_text(docs, encoding):
            yield char_ids(text, table)
        return
    rest = ""
    for text in doc_text(docs, encoding):
        head, _, rest = (rest + text).rpartition("\n")
        if head:
            yield np.array(tokenizer.encode(head + "\n"), dtype=np.int64)
    if rest:
        yield np.array(tokenizer.encode(rest), dtype=np.int64)

"""Text files read line by line: the encoding check, the line-break and byte-order-mark rules, and the plain-text
layouts (one example a line: label_first, regex).

Line breaks: one rule for every reader (plain and .gz text, SST-2, classification, parallel and corpus files, and
the CSV / TSV / JSON Lines parsers, which follow it too): "\\r\\n", "\\r" and "\\n" end a line, as in Python's text
mode with newline=None; every other character (U+2028, U+2029, U+0085, "\\v", "\\f", "\\x1c".."\\x1e") stays inside
its line. A line break at the end of a file ends its last line (it starts no empty one). text_chunks and
text_lines read by this rule, and never with str.splitlines, which also splits at those other characters.

Byte-order mark: one rule for every reader too. A U+FEFF that starts a file is no text (drop_bom: text_chunks drops
it for every line reader, pandas and pyarrow drop it in tables); a U+FEFF anywhere else is a character of its line.
"""

import codecs
import gzip
import io
import re
import zlib
from pathlib import Path

from zoo.data.resolver import DataError

CHUNK = 1 << 20  # bytes decoded at a time
BOM = "\ufeff"  # a byte-order mark; at the start of a file it is no text (drop_bom)


def count_breaks(text: str) -> int:
    """The line breaks in `text` by the module's rule: "\\r\\n", "\\r" and "\\n", one each."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def drop_bom(text: str) -> str:
    """`text` less the byte-order mark (U+FEFF) that may start it: the first characters of a file, a stream or
    stdin, as Python's utf-8-sig codec reads them. A U+FEFF anywhere else is text and stays."""
    return text[1:] if text.startswith(BOM) else text


def text_chunks(path: Path, encoding: str = "utf-8", chunk: int = CHUNK, fix: str | None = None):
    """The decoded text of a file (gzip when its name ends in .gz), chunk by chunk (memory: one chunk), every
    line break ("\\r\\n", "\\r", "\\n"; the module's rule) written as "\\n", as Python's text mode does, and a
    byte-order mark that starts the file dropped (drop_bom), whatever the encoding.

    Raises DataError naming the file, the line (by that rule) and the byte offset of the first undecodable byte,
    with `fix` (default: convert the file, or set data.encoding); for an unknown encoding; for a bad gzip file.
    """
    try:
        decoder = io.IncrementalNewlineDecoder(codecs.getincrementaldecoder(encoding)(), translate=True)
    except LookupError:
        raise DataError(f"data.encoding={encoding!r} is not an encoding Python knows (e.g. utf-8, latin-1)") from None
    gz = path.suffix == ".gz"
    line, offset, started = 1, 0, False
    with gzip.open(path, "rb") if gz else open(path, "rb") as f:
        while True:
            try:
                block = f.read(chunk)
            except (OSError, EOFError, zlib.error) as e:
                if not gz:
                    raise
                raise DataError(f"{path}: not a valid gzip file ({e})") from None
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as e:
                held = max(len(e.object) - len(block), 0)  # bytes of a character begun in the last block
                pending_cr = decoder.getstate()[1] & 1  # a "\r" held back from the last block
                before = ("\r" if pending_cr else "") + codecs.decode(e.object[: e.start], encoding, "replace")
                raise DataError(
                    f"{path}, line {line + count_breaks(before)}: not valid {encoding.upper()} (byte offset "
                    f"{offset - held + e.start}: {e.reason}).\nFix: "
                    + (fix or f"convert the file to {encoding}, or set data.encoding to the file's encoding")
                ) from None
            if text and not started:  # the file's first characters: a byte-order mark there is no text
                started, text = True, drop_bom(text)
            if text:
                line += text.count("\n")
                yield text
            if not block:
                return
            offset += len(block)


def check_encoding(path: Path, encoding: str = "utf-8", chunk: int = CHUNK) -> None:
    """Decode the whole file in chunks (memory stays at one chunk): text_chunks' errors, else nothing."""
    for _ in text_chunks(path, encoding, chunk):
        pass


def text_lines(path: Path, encoding: str = "utf-8", fix: str | None = None) -> list[str]:
    """Every line of a text file (gzip when its name ends in .gz) by the module's rule, without its line break;
    blank lines kept (so that two files stay aligned). Raises text_chunks' DataError (with `fix`)."""
    lines = "".join(text_chunks(path, encoding, fix=fix)).split("\n")
    if lines[-1] == "":  # the break that ends the last line (or an empty file)
        lines.pop()
    return lines


def read_lines(path: Path, encoding: str = "utf-8") -> tuple[list[tuple[int, str]], int]:
    """((line number, text) of every non-blank line, the number of blank lines), by the module's rule."""
    lines = text_lines(path, encoding)
    kept = [(n, ln) for n, ln in enumerate(lines, 1) if ln.strip()]
    return kept, len(lines) - len(kept)


def text_file_lines(path: Path, encoding: str = "utf-8"):
    """The lines of a text file one at a time (memory: one chunk and one line), each ending in "\\n" but perhaps
    the last, by the module's rule (text_chunks). Raises text_chunks' DataError."""
    rest = ""
    for text in text_chunks(path, encoding):
        *lines, rest = (rest + text).split("\n")
        for ln in lines:
            yield ln + "\n"
    if rest:
        yield rest


def split_line(text: str, fmt: str, pattern: re.Pattern | None, path: Path, n: int) -> tuple[str, str]:
    """(text, label) of one line: label_first `<label> <text>`, or regex with named groups text and label.
    Raises DataError naming the file and line when the line does not fit."""
    if fmt == "label_first":
        label, _, body = text.strip().partition(" ")
        if not body.strip():
            raise DataError(f"{path}, line {n}: expected '<label> <text>', found {text[:80]!r}")
        return body.strip(), label
    m = pattern.fullmatch(text.strip())
    if m is None:
        raise DataError(f"{path}, line {n}: does not match data.pattern={pattern.pattern!r}: {text[:80]!r}")
    return m.group("text").strip(), m.group("label")


def compile_pattern(pattern: str | None) -> re.Pattern:
    """data.pattern as a regex with groups `text` and `label`. Raises DataError otherwise."""
    if not pattern:
        raise DataError(
            "data.format=regex needs data.pattern, a regex with named groups (?P<label>...) and "
            "(?P<text>...), e.g. '(?P<label>\\S+?):\\S+ (?P<text>.*)'"
        )
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise DataError(f"data.pattern={pattern!r} is not a valid regex: {e}") from None
    if not {"text", "label"} <= set(rx.groupindex):
        raise DataError(f"data.pattern={pattern!r} needs named groups (?P<text>...) and (?P<label>...)")
    return rx

"""The pipeline zoo encodes with, whatever the tokenizer.json: padding and truncation off, and an added token that a
Replace normalizer writes (e.g. \\d+ -> <num>) matched after normalization, so it is one id (zoo_pipeline)."""

import json

from tokenizers import Tokenizer

from zoo.errors import DataError


def replace_contents(node) -> list[str]:
    """The `content` of every Replace normalizer in a tokenizer.json's normalizer (a nested Sequence too)."""
    if isinstance(node, dict):
        own = [node["content"]] if node.get("type") == "Replace" and isinstance(node.get("content"), str) else []
        return own + [c for v in node.values() for c in replace_contents(v)]
    if isinstance(node, list):
        return [c for v in node for c in replace_contents(v)]
    return []


def zoo_pipeline(tok: Tokenizer, where: str = "the tokenizer") -> Tokenizer:
    """The tokenizer as zoo encodes with it: padding and truncation off (a pretrained file's settings would pad
    every encode_batch to its longest text with the file's pad token, or cut texts zoo never counts), and every
    added token that a Replace normalizer writes (e.g. \\d+ -> " <num> ") matched after normalization
    (`normalized`: true), so the normalizer's <num> is one id, not "<", "num", ">". Returns `tok`, changed in
    place, or a rebuilt copy when an added token changed.
    Raises DataError naming `where` and the token when the normalizer writes it and then changes it (its changed
    form could match other text)."""
    tok.no_padding()
    tok.no_truncation()
    if tok.normalizer is None:
        return tok
    state = json.loads(tok.to_str())
    written = replace_contents(state.get("normalizer"))
    changed = [
        t for t in state.get("added_tokens", []) if not t.get("normalized") and any(t["content"] in c for c in written)
    ]
    if not changed:
        return tok
    for t in changed:
        t["normalized"] = True
    new = Tokenizer.from_str(json.dumps(state))
    for t in changed:  # recognised only as written: a changed form would also match other text
        kept = new.normalizer.normalize_str(t["content"]) == t["content"]
        if not kept or new.encode(t["content"], add_special_tokens=False).ids != [t["id"]]:
            raise DataError(
                f"{where}: its normalizer writes the token {t['content']!r} (a Replace), then changes it to "
                f"{new.normalizer.normalize_str(t['content'])!r}; zoo reads such a token as one id only where the "
                f"normalizer leaves it as written.\nFix: use "
                f"a tokenizer.json whose normalizer leaves {t['content']!r} as it is (its Replace last), or "
                f"data.tokenizer=bpe"
            )
    return new

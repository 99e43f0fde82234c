"""data.limit: each split keeps its first N examples, for quick and debug runs (debug=limit). An example is a
classification example, a sentence pair, or a language model's window (zoo.data.text_corpus)."""

SPLITS = ("train", "val", "test")


def first_examples(data: dict, limit: int | None, splits=SPLITS) -> dict:
    """data ({split: a list of examples, or a tuple of parallel lists such as (sources, targets)}) with each split
    of `splits` it holds cut to its first `limit` items; unchanged when limit is None."""
    if limit is None:
        return data
    cut = {
        s: tuple(x[:limit] for x in v) if isinstance(v, tuple) else v[:limit] for s, v in data.items() if s in splits
    }
    return {**data, **cut}

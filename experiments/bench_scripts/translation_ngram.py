"""Source-blind baselines of the translation study: character n-gram models of the TARGET side alone, scored as the
study scores its models (docs/scaling-laws.md, "The translation study"). A model that reads the source should beat
them; one at a baseline's loss may be a language model of Spanish that ignores the English.

The data are data=bible_en_es as experiment=scaling_translation reads it (zoo.data.bible.BibleEnEs, its chapter
split and character tokenizer): each model is fitted on the training split's target rows (tgt_out: the verse's
token ids, then EOS, after BOS) and scored on the validation split's, in nats per target token, as val/loss
counts them. The models: interpolated Witten-Bell n-grams (Witten and Bell 1991; Chen and Goodman 1998, sec.
2.5) of orders 1 to --max-order, fitted on the whole training split and, with --tokens, on its first that many
target tokens (as much as a budget trains).

    python experiments/bench_scripts/translation_ngram.py                      # orders 1-5, the whole split
    python experiments/bench_scripts/translation_ngram.py --tokens 655041      # s1's tuning budget's tokens
"""

import argparse
import math
import os
from collections import Counter, defaultdict

os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))

from zoo.data.bible import BibleEnEs  # noqa: E402

BOS = -1  # the context before a verse's first token (any id the tokenizer does not use)


def rows(dataset, tokens: int | None = None) -> list[list[int]]:
    """The target rows (tgt_out) of a TranslationSet, in order; with `tokens`, the first rows holding that many."""
    out, n = [], 0
    for row in dataset.tgt_out:
        if tokens is not None and n >= tokens:
            break
        out.append(list(row))
        n += len(row)
    return out


class WittenBell:
    """An interpolated Witten-Bell n-gram model of order `order` over token ids (vocab: the ids it may predict)."""

    def __init__(self, train: list[list[int]], order: int, vocab: int):
        self.order, self.vocab = order, vocab
        self.counts = [Counter() for _ in range(order + 1)]  # [n][(context..., token)]
        self.context = [Counter() for _ in range(order + 1)]  # [n][context]: its tokens seen
        self.types = [defaultdict(set) for _ in range(order + 1)]  # [n][context]: its distinct next tokens
        for row in train:
            padded = [BOS] * (order - 1) + row
            for i in range(order - 1, len(padded)):
                for n in range(1, order + 1):
                    gram = tuple(padded[i - n + 1 : i + 1])
                    self.counts[n][gram] += 1
                    self.context[n][gram[:-1]] += 1
                    self.types[n][gram[:-1]].add(gram[-1])

    def prob(self, history: tuple, token: int) -> float:
        """P(token | the last order - 1 tokens of history), interpolated from the uniform distribution up."""
        p = 1.0 / self.vocab
        for n in range(1, self.order + 1):
            h = history[len(history) - (n - 1) :] if n > 1 else ()
            seen = self.context[n].get(h, 0)
            if seen:
                t = len(self.types[n][h])
                p = (self.counts[n].get(h + (token,), 0) + t * p) / (seen + t)
        return p

    def nats(self, rows_: list[list[int]]) -> float:
        """Cross-entropy per token of `rows_`, in nats."""
        total, k = 0.0, 0
        for row in rows_:
            padded = [BOS] * (self.order - 1) + row
            for i in range(self.order - 1, len(padded)):
                total -= math.log(self.prob(tuple(padded[i - self.order + 1 : i]), padded[i]))
                k += 1
        return total / k


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-order", type=int, default=5, help="the highest order (default %(default)s)")
    p.add_argument("--tokens", type=int, nargs="*", default=[], help="also fit on the first N training target tokens")
    args = p.parse_args(argv)
    dm = BibleEnEs(tokenizer_dir=None)
    dm.setup()
    val = rows(dm.val_set)
    vocab = dm.tgt_tokenizer.vocab_size
    print(f"validation: {len(val):,} verses, {sum(map(len, val)):,} target tokens (each verse's, then EOS)")
    for tokens in [None, *args.tokens]:
        train = rows(dm.train_set, tokens)
        what = f"the first {sum(map(len, train)):,}" if tokens else f"all {sum(map(len, train)):,}"
        for order in range(1, args.max_order + 1):
            nats = WittenBell(train, order, vocab).nats(val)
            print(f"order {order}, fitted on {what} training target tokens: {nats:.4f} nats / target token")


if __name__ == "__main__":
    main()

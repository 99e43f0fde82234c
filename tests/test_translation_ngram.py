"""experiments/bench_scripts/translation_ngram.py: its interpolated Witten-Bell model against the closed form on a
tiny corpus, and a distribution at every context."""

import math

import pytest
from zoo_run import bench_script


@pytest.fixture(scope="module")
def ngram():
    return bench_script("translation_ngram")


def test_witten_bell_matches_its_closed_form(ngram):
    """Rows [1, 2] and [1, 3] (vocab 4), order 2. Unigram: counts 1:2, 2:1, 3:1 of 4 tokens, 3 types, so
    P1(2) = (1 + 3 / 4) / (4 + 3). After 1: tokens 2 and 3 once each, 2 types, so P(2 | 1) = (1 + 2 P1(2)) / (2 + 2);
    after BOS only 1 (1 type): P(1 | BOS) = (2 + P1(1)) / (2 + 1)."""
    m = ngram.WittenBell([[1, 2], [1, 3]], order=2, vocab=4)
    p1 = {t: (c + 3 / 4) / (4 + 3) for t, c in {0: 0, 1: 2, 2: 1, 3: 1}.items()}
    assert m.prob((1,), 2) == pytest.approx((1 + 2 * p1[2]) / 4)
    assert m.prob((ngram.BOS,), 1) == pytest.approx((2 + p1[1]) / 3)
    assert m.nats([[1, 2]]) == pytest.approx(-(math.log((2 + p1[1]) / 3) + math.log((1 + 2 * p1[2]) / 4)) / 2)


def test_each_context_gives_a_distribution(ngram):
    """The probabilities over the vocabulary sum to 1 after a seen, an unseen and the empty context, order 3."""
    m = ngram.WittenBell([[1, 2, 3, 1, 2], [2, 2, 1]], order=3, vocab=5)
    for history in ((1, 2), (3, 3), (ngram.BOS, ngram.BOS), (2,)):
        assert sum(m.prob(history, t) for t in range(5)) == pytest.approx(1.0), history

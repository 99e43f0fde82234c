"""Top-k / top-p sampling (zoo.model.decoding.generate) against Hugging Face's logits warpers (TemperatureLogitsWarper,
TopKLogitsWarper, TopPLogitsWarper, applied in that order as its generate does), exact down to which tokens
are kept, on random logits and on hand-made distributions (the token that crosses p, ties, temperature,
k >= vocabulary); and the frequencies of many seeded draws against the renormalised distribution (chi-square)."""

import pytest
import torch
from scipy.stats import chisquare

from zoo.model.decoding.generate import filter_logits, sample_next

tf = pytest.importorskip("transformers")


def hf_filter(logits, temperature=1.0, top_k=None, top_p=None):
    """transformers' warpers on logits (B, V) float32, in generate's order: temperature, top-k, top-p."""
    scores = logits.float()
    if temperature != 1.0:
        scores = tf.TemperatureLogitsWarper(temperature)(None, scores)
    if top_k is not None:
        scores = tf.TopKLogitsWarper(top_k)(None, scores)
    if top_p is not None and top_p < 1.0:
        scores = tf.TopPLogitsWarper(top_p)(None, scores)
    return scores


def kept(logits) -> list:
    """Per row, the sorted ids of the tokens left finite."""
    return [torch.isfinite(row).nonzero().flatten().tolist() for row in logits]


def from_probs(*rows) -> torch.Tensor:
    """Logits (B, V) whose softmax is each row of probabilities."""
    return torch.tensor(rows, dtype=torch.float64).log().float()


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.7])
@pytest.mark.parametrize(
    "top_k, top_p",
    [
        (1, None),
        (5, None),
        (49, None),
        (None, 0.1),
        (None, 0.5),
        (None, 0.9),
        (None, 0.99),
        (10, 0.8),
        (3, 0.95),
        (50, 0.6),
        (80, None),
    ],
)
def test_same_tokens_and_logits_as_transformers(temperature, top_k, top_p):
    """64 rows of random logits over 50 tokens (scales 0.5 .. 4, so nuclei of 1 to 40 tokens): the kept tokens
    and their logits / temperature are transformers' exactly."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 50, generator=g) * torch.linspace(0.5, 4.0, 64)[:, None]
    ours = filter_logits(logits, temperature, top_k, top_p)
    theirs = hf_filter(logits, temperature, top_k, top_p)
    assert kept(ours) == kept(theirs)
    finite = torch.isfinite(theirs)
    torch.testing.assert_close(ours[finite], theirs[finite], rtol=0, atol=0)
    sizes = finite.sum(1)
    if top_p is not None and top_k is None:
        assert sizes.min() < sizes.max()  # nuclei of different sizes were compared
    if top_k is not None and top_p is None:
        assert (sizes == min(top_k, 50)).all()


@pytest.mark.parametrize(
    "top_p, want",
    [(0.3, [0]), (0.5, [0]), (0.51, [0, 1]), (0.7, [0, 1]), (0.8, [0, 1]), (0.81, [0, 1, 2]), (0.96, [0, 1, 2, 3])],
)
def test_the_token_that_crosses_p_stays(top_p, want):
    """Probabilities 0.5, 0.3, 0.15, 0.05 (mass before each: 0, 0.5, 0.8, 0.95): the nucleus is the smallest
    set, most probable first, whose mass reaches p; the token whose probability carries the mass across p is in
    it (p = 0.7: {0.5, 0.3}, not {0.5}), and one that only reaches p ends it (p = 0.5: {0.5})."""
    logits = from_probs([0.5, 0.3, 0.15, 0.05])
    assert kept(filter_logits(logits, top_p=top_p)) == kept(hf_filter(logits, top_p=top_p)) == [want]


def test_ties():
    """Top-k keeps every token tied with the k-th (as transformers does); a nucleus that ends inside a tie keeps
    as many of the tied tokens as it needs, and one that ends after a tie keeps all of it."""
    logits = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0, 0.0]])
    for k, want in ((1, [0]), (2, [0, 1, 2, 3]), (4, [0, 1, 2, 3]), (5, [0, 1, 2, 3, 4])):
        assert kept(filter_logits(logits, top_k=k)) == kept(hf_filter(logits, top_k=k)) == [want], k
    probs = from_probs([0.3, 0.2, 0.3, 0.2])
    assert kept(filter_logits(probs, top_p=0.55)) == kept(hf_filter(probs, top_p=0.55)) == [[0, 2]]
    inside = kept(filter_logits(probs, top_p=0.65))[0]
    assert len(inside) == 3 and {0, 2} <= set(inside)  # which of the tied 0.2s completes it is arbitrary
    assert len(kept(hf_filter(probs, top_p=0.65))[0]) == 3


def test_temperature_is_applied_before_the_filters():
    """Probabilities 0.6, 0.25, 0.1, 0.05 at p = 0.7: two tokens at temperature 1, one at 0.5 (0.6^2 over
    0.36 + 0.0625 + 0.01 + 0.0025 = 0.83), three at 4 (0.34, 0.27, 0.21, 0.18); transformers agrees, and the
    kept logits are divided by the temperature."""
    logits = from_probs([0.6, 0.25, 0.1, 0.05])
    for temperature, want in ((1.0, [0, 1]), (0.5, [0]), (4.0, [0, 1, 2])):
        ours = filter_logits(logits, temperature, top_p=0.7)
        assert kept(ours) == kept(hf_filter(logits, temperature, top_p=0.7)) == [want], temperature
        torch.testing.assert_close(ours[0, want], logits[0, want] / temperature)
    p = (torch.tensor([0.6, 0.25, 0.1, 0.05]) ** 2).div(0.435)
    assert p[0].item() == pytest.approx(0.8276, abs=1e-4)


def test_k_at_least_the_vocabulary_keeps_every_token():
    logits = torch.randn(3, 7, generator=torch.Generator().manual_seed(1))
    for k in (7, 8, 100):
        assert kept(filter_logits(logits, top_k=k)) == [list(range(7))] * 3
        assert kept(hf_filter(logits, top_k=k)) == [list(range(7))] * 3
    assert kept(filter_logits(logits, top_p=1.0)) == [list(range(7))] * 3


# probabilities 0.35, 0.25, 0.15, 0.12, 0.08, 0.05 (mass before each: 0, .35, .60, .75, .87, .95)
PROBS = [0.12, 0.35, 0.05, 0.25, 0.08, 0.15]  # ids 1, 3, 5, 0, 4, 2 by probability


@pytest.mark.parametrize(
    "top_k, top_p, keep",
    [
        (3, None, [1, 3, 5]),
        (None, 0.7, [1, 3, 5]),  # 0.35 + 0.25 = 0.60 < 0.7: the third (0.15) crosses it and stays
        (None, 0.5, [1, 3]),
        (2, 0.9, [1, 3]),
        (None, None, [0, 1, 2, 3, 4, 5]),
    ],
)
def test_draw_frequencies_match_the_renormalised_distribution(top_k, top_p, keep):
    """40,000 seeded draws at temperature 1: no token outside the kept set is ever drawn, and the counts of the
    kept ones fit their renormalised probabilities (chi-square goodness of fit, p > 1e-3: a set of one token
    fewer or more, or unrenormalised weights, give p < 1e-30 at this size)."""
    n = 40_000
    logits = from_probs(PROBS).expand(n, -1)
    g = torch.Generator().manual_seed(7)
    draws = sample_next(logits, 1.0, top_k, top_p, g)
    counts = torch.bincount(draws, minlength=len(PROBS))
    assert sorted(counts.nonzero().flatten().tolist()) == keep
    p = torch.tensor(PROBS, dtype=torch.float64)[keep]
    result = chisquare(counts[keep].double().numpy(), (n * p / p.sum()).numpy())
    assert result.pvalue > 1e-3, (counts.tolist(), result)


def test_greedy_and_bad_arguments():
    logits = from_probs([0.1, 0.6, 0.3])
    assert sample_next(logits, temperature=0.0).tolist() == [1]
    assert kept(filter_logits(logits, 1.0, 1, 0.01)) == [[1]]

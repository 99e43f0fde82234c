"""Statistics of zoo.report: intervals over seeds and paired significance tests between runs.

Pure functions of numbers and strings (no run files): the Student-t interval of a mean over seeds, McNemar's
exact test on paired classifications, a token-weighted paired bootstrap on per-window losses, and
sacreBLEU's own paired bootstrap resampling for BLEU and chrF. Every bootstrap uses a fixed seed (SEED).
"""

import contextlib
import math
import os
from collections.abc import Sequence

import numpy as np

from zoo.report_runs import ReportError

SEED = 12345  # every bootstrap's seed: sacreBLEU's default (SACREBLEU_SEED), used for zoo's own bootstrap too
BOOTSTRAP_SAMPLES = 10000  # zoo's paired bootstrap (LM losses)
SACREBLEU_SAMPLES = 1000  # sacreBLEU's default for --paired-bs
ALPHA = 0.05  # significance level of every "significant" mark


def t_interval(values: Sequence[float], confidence: float = 0.95) -> dict:
    """Mean over seeds with its Student-t confidence interval.

    values: the n per-seed values of one metric. Returns {"n", "mean", "std" (sample std, ddof 1),
    "half" (half-width t_{(1+c)/2, n-1} * std / sqrt(n), scipy.stats.t.ppf), "lo", "hi"}. With n = 1 there is
    no spread to estimate: std, half, lo and hi are None (printed "n/a (1 seed)", never +-0).
    Source: the t interval of a normal mean with unknown variance (Student 1908)."""
    x = np.asarray([float(v) for v in values], dtype=float)
    n = len(x)
    if n == 0:
        raise ValueError("t_interval of no values")
    mean = float(x.mean())
    if n == 1:
        return {"n": 1, "mean": mean, "std": None, "half": None, "lo": None, "hi": None}
    try:
        from scipy.stats import t  # scipy: installed as optuna's dependency (zoo's dev / sweep extras)
    except ImportError:
        raise ReportError(
            "the Student-t intervals need scipy, which zoo's base install does not bring: "
            "pip install scipy (or zoo's dev / sweep extras)"
        ) from None

    std = float(x.std(ddof=1))
    half = float(t.ppf((1 + confidence) / 2, n - 1)) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "std": std, "half": half, "lo": mean - half, "hi": mean + half}


def mcnemar_exact(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> dict:
    """McNemar's exact test of two classifiers on the same examples (paired by position).

    correct_a, correct_b: (N,) booleans, example i classified correctly by A / by B. Returns {"b": # A right and
    B wrong, "c": # A wrong and B right, "p": two-sided p-value}. Under H0 (equal error rates) the b of the
    n = b + c discordant examples is Binomial(n, 1/2): p = min(1, 2 * sum_{i <= min(b, c)} C(n, i) / 2^n);
    p = 1 when n = 0. Source: McNemar (1947), in its exact (binomial) form; see Dietterich (1998), "Approximate
    statistical tests for comparing supervised classification learning algorithms"."""
    a = np.asarray(correct_a, dtype=bool)
    b_ = np.asarray(correct_b, dtype=bool)
    if a.shape != b_.shape:
        raise ValueError(f"mcnemar_exact: {a.shape} vs {b_.shape} examples")
    b = int((a & ~b_).sum())
    c = int((~a & b_).sum())
    n = b + c
    if n == 0:
        return {"b": b, "c": c, "p": 1.0}
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return {"b": b, "c": c, "p": min(1.0, 2.0 * tail / 2**n)}


def paired_bootstrap(
    diff: Sequence[float], weights: Sequence[float] | None = None, n_samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED
) -> dict:
    """Paired bootstrap test of a weighted mean difference.

    diff: (N,) per-unit differences A - B (e.g. nats per token of validation window i); weights: (N,) unit
    weights (scored tokens of window i), default 1. The statistic is delta = sum(w d) / sum(w) (the difference
    of the two token-weighted mean losses). Units are resampled with replacement n_samples times
    (numpy default_rng(seed)); the two-sided p-value is (1 + #{|delta*_b - delta| >= |delta|}) / (n_samples + 1),
    the bootstrap distribution shifted to the null (Efron & Tibshirani 1993, ch. 16; Koehn 2004, "Statistical
    significance tests for machine translation evaluation"). Identical systems (all d = 0) give p = 1.
    Returns {"delta", "p", "n"}."""
    d = np.asarray(diff, dtype=float)
    w = np.ones_like(d) if weights is None else np.asarray(weights, dtype=float)
    if d.shape != w.shape or d.ndim != 1 or len(d) == 0:
        raise ValueError(f"paired_bootstrap: diff {d.shape} and weights {w.shape} must be the same non-empty (N,)")
    delta = float((w * d).sum() / w.sum())
    rng = np.random.default_rng(seed)
    hits, done, chunk = 0, 0, max(1, min(n_samples, 2_000_000 // len(d)))
    while done < n_samples:
        k = min(chunk, n_samples - done)
        idx = rng.integers(0, len(d), size=(k, len(d)))
        ws = w[idx]
        star = (ws * d[idx]).sum(1) / ws.sum(1)
        hits += int((np.abs(star - delta) >= abs(delta) - 1e-12).sum())
        done += k
    return {"delta": delta, "p": (1 + hits) / (n_samples + 1), "n": len(d)}


@contextlib.contextmanager
def _sacrebleu_seed(seed: int):
    """sacreBLEU's PairedTest reads its seed from $SACREBLEU_SEED when it is built: pin it there for the call."""
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = old


def sacrebleu_paired(
    hyps_a: Sequence[str],
    hyps_b: Sequence[str],
    refs: Sequence[str],
    n_samples: int = SACREBLEU_SAMPLES,
    seed: int = SEED,
) -> dict[str, dict]:
    """sacreBLEU's paired bootstrap resampling (sacrebleu.significance.PairedTest, test_type "bs"; Koehn 2004)
    of system B against system A on BLEU and chrF, with sacreBLEU's default metrics (sacrebleu.metrics.BLEU(),
    CHRF(): the corpus_bleu / corpus_chrf the translation task logs).

    hyps_a, hyps_b, refs: (N,) detokenized sentences, paired by position (one reference each). Returns
    {"bleu": {"a", "b" (corpus scores, 0-100), "p", "signature"}, "chrf": {...}}; the signature is sacreBLEU's
    (nrefs, bs, seed, tokenizer, version...). When B's outputs equal A's, "p" is 1.0 and "identical" True:
    sacreBLEU counts resampled differences strictly greater than the observed one, so a system against itself
    would get 1 / (n_samples + 1), which is no evidence of a difference."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    if not len(hyps_a) == len(hyps_b) == len(refs) or not len(refs):
        raise ValueError(f"sacrebleu_paired: {len(hyps_a)}, {len(hyps_b)} hypotheses and {len(refs)} references")
    with _sacrebleu_seed(seed):
        test = PairedTest(
            [("A", list(hyps_a)), ("B", list(hyps_b))],
            {"BLEU": BLEU(), "chrF": CHRF()},
            references=[list(refs)],
            test_type="bs",
            n_samples=n_samples,
        )
        signatures, scores = test()
    identical = list(hyps_a) == list(hyps_b)
    out = {}
    for key, name in (("bleu", "BLEU"), ("chrf", next(k for k in scores if k.startswith("chrF")))):
        base, other = scores[name]
        out[key] = {
            "a": float(base.score),
            "b": float(other.score),
            "p": 1.0 if identical else float(other.p_value),
            "identical": identical,
            "signature": str(signatures[name]),
        }
    return out


def pooled(per_seed: list[Sequence]) -> list:
    """Concatenate per-seed sequences (seed-rank order): how zoo.report pools several seeds' outputs into one
    paired test (each (seed, example) is a unit; references are repeated once per seed)."""
    return [x for seq in per_seed for x in seq]

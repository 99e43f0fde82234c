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

from zoo.report.runs import ReportError

SEED = 12345  # every bootstrap's seed: sacreBLEU's default (SACREBLEU_SEED), used for zoo's own bootstrap too
BOOTSTRAP_SAMPLES = 10000  # zoo's paired bootstrap (LM losses)
SACREBLEU_SAMPLES = 1000  # sacreBLEU's default for --paired-bs
ALPHA = 0.05  # significance level of every "significant" mark


def _vector(func: str, name: str, values, dtype=float) -> np.ndarray:
    """`values` as a non-empty 1-d array of `dtype`. Raises ValueError naming func, the argument and its shape, or
    the first value that is not finite (float) or not a truth value (bool: True / False / 0 / 1)."""
    try:
        raw = np.asarray(values, dtype=object if dtype is bool else float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{func}: {name} must be a sequence of numbers ({e})") from None
    if raw.ndim != 1 or raw.size == 0:
        raise ValueError(f"{func}: {name} must be a non-empty 1-d sequence, got shape {raw.shape}")
    if dtype is bool:
        bad = [i for i, v in enumerate(raw) if not (isinstance(v, (bool, np.bool_)) or (_is_number(v) and v in (0, 1)))]
        if bad:
            raise ValueError(f"{func}: {name}[{bad[0]}] = {raw[bad[0]]!r}: give True / False (or 1 / 0) per example")
        return raw.astype(bool)
    bad = np.flatnonzero(~np.isfinite(raw))
    if len(bad):
        raise ValueError(f"{func}: {name}[{bad[0]}] = {float(raw[bad[0]])!r} is not finite ({len(bad)} such value(s))")
    return raw


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _count(func: str, name: str, value, minimum: int) -> int:
    """`value` as an int >= minimum; raises ValueError naming func, the argument and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{func}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def t_interval(values: Sequence[float], confidence: float = 0.95) -> dict:
    """Mean over seeds with its Student-t confidence interval.

    values: the n per-seed values of one metric. Returns {"n", "mean", "std" (sample std, ddof 1),
    "half" (half-width t_{(1+c)/2, n-1} * std / sqrt(n), scipy.stats.t.ppf), "lo", "hi"}. With n = 1 there is
    no spread to estimate: std, half, lo and hi are None (printed "n/a (1 seed)", never +-0). Raises ValueError
    for no values, a value that is not finite (naming it) or a confidence outside (0, 1).
    Source: the t interval of a normal mean with unknown variance (Student 1908)."""
    x = _vector("t_interval", "values", values)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"t_interval: confidence must be in (0, 1), e.g. 0.95, got {confidence!r}")
    n = len(x)
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
    B wrong, "c": # A wrong and B right, "p": two-sided p-value, "n": N, "n_diff": b + c}. Under H0 (equal error
    rates) the b of the n = b + c discordant examples is Binomial(n, 1/2): p = min(1, 2 * sum_{i <= min(b, c)}
    C(n, i) / 2^n), computed by scipy.stats.binomtest (exact at any n; it underflows to 0.0 only below the
    smallest double, n beyond about 1,075 all one way); p = 1 when n = 0, so a single example (n <= 1) is never
    significant. Raises ValueError for no examples, other shapes, or an entry that is not True / False / 0 / 1.
    Source: McNemar (1947), in its exact (binomial) form; see Dietterich (1998), "Approximate
    statistical tests for comparing supervised classification learning algorithms"."""
    from scipy.stats import binomtest

    a = _vector("mcnemar_exact", "correct_a", correct_a, bool)
    b_ = _vector("mcnemar_exact", "correct_b", correct_b, bool)
    if a.shape != b_.shape:
        raise ValueError(f"mcnemar_exact: {a.shape} vs {b_.shape} examples; pair the same examples")
    b = int((a & ~b_).sum())
    c = int((~a & b_).sum())
    n = b + c
    p = 1.0 if n == 0 else min(1.0, float(binomtest(b, n, 0.5, alternative="two-sided").pvalue))
    return {"b": b, "c": c, "p": p, "n": int(a.size), "n_diff": n}


def randomization_floor(n_diff: int) -> float:
    """min(1, 2 / 2^n_diff): the smallest two-sided p-value an exact paired test can reach when n_diff units
    (examples, segments, windows) differ between two systems. A paired randomization (sign-flip) test has
    2^n_diff equally likely swaps of the differing units, and the observed one and its mirror (all swapped)
    are at least as extreme as the observed difference (Riezler & Maxwell 2005, "On some pitfalls in automatic
    evaluation and significance testing for MT"). The bootstraps below report max(their p, this floor): a
    bootstrap of one differing unit, or of a few that all differ by the same amount, resamples the same
    difference every time and would otherwise print p = 1 / (resamples + 1)."""
    n_diff = _count("randomization_floor", "n_diff", n_diff, 0)
    return 1.0 if n_diff <= 1 else min(1.0, 2.0 ** (1 - n_diff))


def paired_bootstrap(
    diff: Sequence[float], weights: Sequence[float] | None = None, n_samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED
) -> dict:
    """Paired bootstrap test of a weighted mean difference.

    diff: (N,) per-unit differences A - B (e.g. nats per token of validation window i); weights: (N,) unit
    weights (scored tokens of window i), default 1. The statistic is delta = sum(w d) / sum(w) (the difference
    of the two token-weighted mean losses). Units are resampled with replacement n_samples times
    (numpy default_rng(seed)); the bootstrap p-value is (1 + #{|delta*_b - delta| >= |delta|}) / (n_samples + 1),
    the bootstrap distribution shifted to the null (Efron & Tibshirani 1993, ch. 16; Koehn 2004, "Statistical
    significance tests for machine translation evaluation"). Units of weight 0 are left out first: they are
    not resampled and not counted. The reported "p" is max(that, randomization_floor(n_diff)), n_diff = the units
    whose d is not 0; it is 1 when delta is 0 (identical systems, or differences that cancel). Returns {"delta",
    "p", "p_bootstrap" (None when no resampling was needed), "n" (units of positive weight), "n_diff"}.
    Raises ValueError naming the argument for empty or mismatched inputs, a value that is not finite, weights that
    are negative or sum to 0, or n_samples < 1."""
    d = _vector("paired_bootstrap", "diff", diff)
    w = np.ones_like(d) if weights is None else _vector("paired_bootstrap", "weights", weights)
    if d.shape != w.shape:
        raise ValueError(f"paired_bootstrap: diff {d.shape} and weights {w.shape} must be the same (N,)")
    if (w < 0).any() or w.sum() <= 0:
        i = int(np.argmin(w))
        raise ValueError(
            f"paired_bootstrap: weights must be >= 0 with a positive sum, got weights[{i}] = {float(w[i])!r}, "
            f"sum {float(w.sum())!r}"
        )
    n_samples = _count("paired_bootstrap", "n_samples", n_samples, 1)
    d, w = d[w > 0], w[w > 0]  # a unit of weight 0 (a window that scores no token) is no unit
    delta = float((w * d).sum() / w.sum())
    n_diff = int((d != 0).sum())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))  # float rounding of a difference that is 0
    if n_diff == 0 or abs(delta) <= tol:
        return {"delta": delta, "p": 1.0, "p_bootstrap": None, "n": len(d), "n_diff": n_diff}
    rng = np.random.default_rng(seed)
    hits, done, chunk = 0, 0, max(1, min(n_samples, 2_000_000 // len(d)))
    while done < n_samples:
        k = min(chunk, n_samples - done)
        idx = rng.integers(0, len(d), size=(k, len(d)))
        ws = w[idx]
        star = (ws * d[idx]).sum(1) / ws.sum(1)  # every weight > 0
        hits += int((np.abs(star - delta) >= abs(delta) - tol).sum())
        done += k
    p_boot = (1 + hits) / (n_samples + 1)
    return {
        "delta": delta,
        "p": max(p_boot, randomization_floor(n_diff)),
        "p_bootstrap": p_boot,
        "n": len(d),
        "n_diff": n_diff,
    }


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
    {"bleu": {"a", "b" (corpus scores, 0-100), "p", "p_sacrebleu", "n" (N), "n_diff", "identical", "signature"},
    "chrf": {...}}; the signature is sacreBLEU's (nrefs, bs, seed, tokenizer, version...). n_diff counts the
    segments whose sufficient statistics under the metric differ between A and B (n-gram matches and lengths
    for BLEU, character and word n-gram matches for chrF): the segments the metric can tell apart.
    "p" is sacreBLEU's p-value ("p_sacrebleu") except where sacreBLEU's rule (it counts resampled differences
    strictly greater than the observed one, +1) would claim a difference from none:
    - identical outputs ("identical" True), or equal corpus scores (n_diff may be > 0, e.g. different words
      that match the reference equally): p = 1, the observed difference is 0;
    - otherwise p = max(p_sacrebleu, randomization_floor(n_diff)): a single differing segment (N = 1 included)
      is never significant, since every resample repeats it.
    Raises ValueError for empty or mismatched inputs, a sentence that is not a string, or n_samples < 1."""
    from sacrebleu.metrics import BLEU, CHRF

    if not len(hyps_a) == len(hyps_b) == len(refs) or not len(refs):
        raise ValueError(f"sacrebleu_paired: {len(hyps_a)}, {len(hyps_b)} hypotheses and {len(refs)} references")
    hyps_a, hyps_b, refs = list(hyps_a), list(hyps_b), list(refs)
    for name, seq in (("hyps_a", hyps_a), ("hyps_b", hyps_b), ("refs", refs)):
        bad = [i for i, x in enumerate(seq) if not isinstance(x, str)]
        if bad:
            raise ValueError(f"sacrebleu_paired: {name}[{bad[0]}] = {seq[bad[0]]!r}: give one string per sentence")
    n_samples = _count("sacrebleu_paired", "n_samples", n_samples, 1)
    signatures, scores = _sacrebleu_paired_test(hyps_a, hyps_b, refs, n_samples, seed)
    identical = hyps_a == hyps_b
    out = {}
    chrf = next(k for k in scores if k.startswith("chrF"))
    for key, name, metric in (("bleu", "BLEU", BLEU), ("chrf", chrf, CHRF)):
        base, other = scores[name]
        n_diff = 0 if identical else segments_that_differ(metric, hyps_a, hyps_b, refs)
        out[key] = _paired_entry(base, other, n_diff, len(refs), identical, str(signatures[name]))
    return out


def _sacrebleu_paired_test(hyps_a: list[str], hyps_b: list[str], refs: list[str], n_samples: int, seed: int):
    """Run sacrebleu.significance.PairedTest (paired bootstrap, "bs") of B against A on BLEU() and CHRF(),
    seeded with `seed`; returns its (signatures, scores), keyed by metric name ("BLEU", "chrF...")."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    with _sacrebleu_seed(seed):
        test = PairedTest(
            [("A", hyps_a), ("B", hyps_b)],
            {"BLEU": BLEU(), "chrF": CHRF()},
            references=[refs],
            test_type="bs",
            n_samples=n_samples,
        )
        return test()


def _paired_entry(base, other, n_diff: int, n: int, identical: bool, signature: str) -> dict:
    """One metric's entry of sacrebleu_paired from sacreBLEU's results for A (base) and B (other): corpus
    scores (0-100), p (1 for identical outputs, equal scores or no differing segment; else sacreBLEU's p
    floored at randomization_floor(n_diff)), p_sacrebleu, n, n_diff, identical, signature."""
    a, b = float(base.score), float(other.score)
    p_sacre = float(other.p_value)
    p = 1.0 if identical or a == b or n_diff == 0 else max(p_sacre, randomization_floor(n_diff))
    return {
        "a": a,
        "b": b,
        "p": p,
        "p_sacrebleu": p_sacre,
        "n": n,
        "n_diff": n_diff,
        "identical": identical,
        "signature": signature,
    }


def segments_that_differ(metric_cls, hyps_a: list[str], hyps_b: list[str], refs: list[str]) -> int:
    """How many segments have different sufficient statistics under a sacreBLEU metric (BLEU, CHRF with their
    defaults) for hypotheses A and B against the same references: the per-segment statistics PairedTest itself
    resamples (Metric._extract_corpus_statistics), compared only where the two hypotheses differ as strings."""
    differ = [i for i, (x, y) in enumerate(zip(hyps_a, hyps_b)) if x != y]
    if not differ:
        return 0
    metric = metric_cls(references=[[refs[i] for i in differ]])  # references tokenized once, for both systems
    sa = metric._extract_corpus_statistics([hyps_a[i] for i in differ], None)
    sb = metric._extract_corpus_statistics([hyps_b[i] for i in differ], None)
    return sum(list(x) != list(y) for x, y in zip(sa, sb))


def pooled(per_seed: list[Sequence]) -> list:
    """Concatenate per-seed sequences (seed-rank order): how zoo.report pools several seeds' outputs into one
    paired test (each (seed, example) is a unit; references are repeated once per seed)."""
    return [x for seq in per_seed for x in seq]

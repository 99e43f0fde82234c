"""The translation task's BLEU and chrF (zoo.tasks.translation) against sacreBLEU's corpus_bleu / corpus_chrf on
fixed hypotheses and references, in the default suite: the test epoch's logged test/bleu, test/chrf (and the
beam's), whose hypotheses arrive out of order, and a corpus where swapping hypotheses and references changes
both scores."""

from types import SimpleNamespace

import pytest
import sacrebleu

from zoo.tasks.translation import Translation

REFS = [
    "a man in a blue shirt is standing on a ladder cleaning windows .",
    "two young children are playing in the sand at the beach .",
    "a group of people stand in front of an igloo .",
    "a dog runs through the grass with a stick in its mouth .",
]
# contiguous pieces of the references, 0.4 of their length: every n-gram matches, and BLEU's brevity penalty
# (0.22) falls on them; swapped, the references' n-grams mostly miss (precision 40 / 35 / 29 / 21 %) with no
# penalty (30.3 instead of 22.3), and chrF, which weights recall twice as much as precision, moves from 45 to 76
HYPS = [
    "a man in a blue shirt",
    "children are playing in the sand",
    "people stand in front",
    "a dog runs through",
]
BEAM = [
    "a man in a blue shirt is on a ladder cleaning the windows .",
    "two young children play in the sand at the beach .",
    "a group of people stands in front of an igloo .",
    "a dog runs in the grass .",
]
SRCS = [f"quelle {i}" for i in range(4)]


def run_test_epoch(hyps, refs, srcs, beam=None):
    """The Translation task's on_test_epoch_end on a stand-in holding decoded hypotheses {index: text}, added in
    reverse order as batches may arrive; returns (the stand-in with its examples, the metrics it logged)."""
    logged = {}
    task = SimpleNamespace(
        hyps={"test": {i: hyps[i] for i in reversed(range(len(hyps)))}},
        trainer=SimpleNamespace(datamodule=SimpleNamespace(test_refs=refs, test_srcs=srcs)),
        hparams=SimpleNamespace(beam_size=2 if beam else 1),
        _t_test=0.0,
        _loss_metrics=lambda split: {},
        log_dict=logged.update,
        log_table=lambda *args, **kwargs: None,
    )
    if beam:
        task.hyps["test_beam"] = {i: beam[i] for i in reversed(range(len(beam)))}
    task._scores = lambda key, refs: Translation._scores(task, key, refs)
    Translation.on_test_epoch_end(task)
    return task, logged


def test_scores_are_sacrebleus_corpus_bleu_and_chrf():
    """test/bleu, test/chrf (greedy) and test/bleu_beam, test/chrf_beam equal sacreBLEU's corpus scores of the
    hypotheses against the references, in the references' order; the examples keep that order."""
    task, logged = run_test_epoch(HYPS, REFS, SRCS, beam=BEAM)
    assert logged["test/bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score, abs=1e-9)
    assert logged["test/chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score, abs=1e-9)
    assert logged["test/bleu_beam"] == pytest.approx(sacrebleu.corpus_bleu(BEAM, [REFS]).score, abs=1e-9)
    assert logged["test/chrf_beam"] == pytest.approx(sacrebleu.corpus_chrf(BEAM, [REFS]).score, abs=1e-9)
    assert task.examples["hyp"] == HYPS and task.examples["ref"] == REFS and task.examples["hyp_beam"] == BEAM
    assert task.examples["ids"] == [0, 1, 2, 3] and task.examples["src"] == SRCS


def test_hypotheses_and_references_are_not_interchangeable():
    """The corpus is asymmetric: BLEU and chrF with the sides swapped differ from the right ones by far more than
    float rounding, and zoo's scores are the right ones (greedy and beam)."""
    right = sacrebleu.corpus_bleu(HYPS, [REFS]).score, sacrebleu.corpus_chrf(HYPS, [REFS]).score
    swapped = sacrebleu.corpus_bleu(REFS, [HYPS]).score, sacrebleu.corpus_chrf(REFS, [HYPS]).score
    assert abs(right[0] - swapped[0]) > 5 and abs(right[1] - swapped[1]) > 20
    _, logged = run_test_epoch(HYPS, REFS, SRCS, beam=HYPS)
    for key in ("", "_beam"):
        assert logged[f"test/bleu{key}"] == pytest.approx(right[0], abs=1e-9)
        assert logged[f"test/chrf{key}"] == pytest.approx(right[1], abs=1e-9)


def test_a_perfect_and_an_empty_corpus():
    """Hypotheses equal to the references score 100 on both; empty hypotheses score 0 on both."""
    _, perfect = run_test_epoch(REFS, REFS, SRCS)
    assert perfect["test/bleu"] == pytest.approx(100.0) and perfect["test/chrf"] == pytest.approx(100.0)
    _, empty = run_test_epoch([""] * 4, REFS, SRCS)
    assert empty["test/bleu"] == 0.0 and empty["test/chrf"] == 0.0

"""What experiment=scaling_translation adds to a cell and to the plan (zoo.run.scaling_cell, zoo.run.scaling_plan):
BLEU and chrF at a size's largest budget, so a reader sees what a loss means, with the loss when each target gets
another pair's source (source_control: does the model read the source?), and the plan's timing of real
translation batches.

BLEU and chrF: sacreBLEU (corpus_bleu, corpus_chrf, default settings) of greedy hypotheses of a fixed subset of
the validation set (validation_subset: scaling.bleu_sentences pairs evenly spaced over it, the same for every
family), detokenized by the target tokenizer, against the raw references. held_out_scores gives the same on the
test split, which nothing else reads: the validation set picks the rates and gives the points."""

import json
import random
import time
from pathlib import Path

import sacrebleu
import torch

from zoo.data.parallel_text import collate_translation
from zoo.run.results import write_json
from zoo.training.optim import adamw

TRANSLATIONS = "translations.json"  # a cell's scores and examples at its largest budget
CHUNK = 32  # sentences decoded together
EXAMPLES = 5  # source / reference / hypothesis triples kept in translations.json


def validation_subset(n_val: int, n: int) -> list[int]:
    """n indices of a validation set of n_val pairs, evenly spaced: floor(k n_val / n) for k < n (all of them
    when n >= n_val). Raises ValueError for n < 1."""
    if n < 1:
        raise ValueError(f"scaling.bleu_sentences={n} must be a positive number of sentences")
    return list(range(n_val)) if n >= n_val else [k * n_val // n for k in range(n)]


def _batches(items: list, pad_id: int, device):
    """TranslationSet items (index, src, tgt_in, tgt_out), collated CHUNK at a time, on `device`."""
    for start in range(0, len(items), CHUNK):
        batch = collate_translation(items[start : start + CHUNK], pad_id)
        yield {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def translate_subset(task, dataset, ids: list[int], pad_id: int) -> list[str]:
    """Greedy hypotheses (task.translate, beam 1; detokenized) of the pairs `ids` of a TranslationSet, in order."""
    was_training = task.training
    task.eval()
    hyps = []
    for batch in _batches([dataset[i] for i in ids], pad_id, task.device):
        hyps += [task.tgt_tokenizer.decode(h) for h in task.translate(batch)]
    task.train(was_training)
    return hyps


def score_translations(task, dm, n: int, dataset=None) -> dict:
    """{"bleu", "chrf" (sacreBLEU, 0-100), "sentences", "signature" (BLEU's), "examples": the first EXAMPLES
    {src, ref, hyp}} of greedy hypotheses of validation_subset(len(dataset), n); dataset: a TranslationSet
    (default dm.val_set)."""
    ds = dm.val_set if dataset is None else dataset
    ids = validation_subset(len(ds), n)
    hyps = translate_subset(task, ds, ids, dm.pad_id)
    refs = [ds.refs[i] for i in ids]
    bleu = sacrebleu.BLEU()
    return {
        "bleu": bleu.corpus_score(hyps, [refs]).score,
        "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
        "sentences": len(ids),
        "signature": str(bleu.get_signature()),
        "examples": [{"src": ds.srcs[i], "ref": r, "hyp": h} for i, r, h in zip(ids[:EXAMPLES], refs, hyps)],
    }


@torch.no_grad()
def mean_loss(task, items: list, pad_id: int) -> float:
    """Nats per target token of TranslationSet items (index, src, tgt_in, tgt_out): task.objective_impl.eval_loss
    of each batch, weighted by its target tokens. The task is left in the mode it was in."""
    was_training = task.training
    task.eval()
    total = weight = 0.0
    for k, batch in enumerate(_batches(items, pad_id, task.device)):
        r = task.objective_impl.eval_loss(batch, k)
        total, weight = total + float(r["loss"]) * float(r["weight"]), weight + float(r["weight"])
    task.train(was_training)
    return total / weight


def held_out_scores(task, dm, n: int) -> dict:
    """The test split's scores, which nothing in the study reads otherwise: {"test_loss" (nats per target token of
    the whole split, mean_loss), "test_bleu", "test_chrf", "test_sentences" (score_translations on
    validation_subset(len(dm.test_set), n))}; {} for data without a test split."""
    ds = getattr(dm, "test_set", None)
    if ds is None or len(ds) == 0:
        return {}
    scores = score_translations(task, dm, n, ds)
    return {
        "test_loss": mean_loss(task, [ds[i] for i in range(len(ds))], dm.pad_id),
        "test_bleu": scores["bleu"],
        "test_chrf": scores["chrf"],
        "test_sentences": scores["sentences"],
    }


def other_sources(lengths: list[int]) -> list[int]:
    """For each pair k of a subset (its sources' lengths, in subset order), the pair whose source replaces its own
    in source_control: of the pairs at least a quarter of the subset away (circularly: another part of the
    validation set, so another chapter or book), the one whose source length is nearest k's (ties: the nearer in
    the subset, then the earlier). Raises ValueError for fewer than 4 pairs."""
    n = len(lengths)
    if n < 4:
        raise ValueError(f"the source control needs at least 4 pairs, got {n}: raise scaling.bleu_sentences")
    apart = lambda j, k: min(abs(j - k), n - abs(j - k))  # noqa: E731 - circular distance in the subset
    out = []
    for k in range(n):
        far = [j for j in range(n) if apart(j, k) >= n / 4]
        out.append(min(far, key=lambda j: (abs(lengths[j] - lengths[k]), apart(j, k), j)))
    return out


def source_control(task, dm, n: int) -> dict:
    """Does the model read the source? The validation loss (nats per target token, task.objective_impl.eval_loss)
    of validation_subset(len(dm.val_set), n) with each pair's own source, and with another pair's
    (other_sources: far from it in the validation set, of about its length, so that a joined sequence's target
    keeps its positions): {"loss_own_source", "loss_other_source"}. A model that ignores the source scores both
    alike."""
    ids = validation_subset(len(dm.val_set), n)
    ds = dm.val_set
    other = other_sources([len(ds[i][1]) for i in ids])
    swapped = [(i, ds[ids[j]][1], *ds[i][2:]) for i, j in zip(ids, other)]
    return {
        "loss_own_source": mean_loss(task, [ds[i] for i in ids], dm.pad_id),
        "loss_other_source": mean_loss(task, swapped, dm.pad_id),
    }


def write_translations(out: Path, point: dict, scores: dict) -> Path:
    """translations.json in a cell folder (atomically): the scores of the point (its budget, steps, tokens, loss)."""
    keep = ("tokens_per_param", "steps", "tokens", "loss")
    return write_json(Path(out) / TRANSLATIONS, {**{k: point[k] for k in keep}, **scores})


def read_translations(out: Path) -> dict | None:
    """A cell folder's translations.json (write_translations), or None where there is none."""
    path = Path(out) / TRANSLATIONS
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _batch(dm, ids: list[int]) -> dict:
    return collate_translation([dm.train_set[i] for i in ids], dm.pad_id)


def mean_step_flops(task, dm) -> float:
    """Training FLOPs of the mean step of an epoch: 3 x the objective's forward FLOPs of each batch at its padded
    shape (zoo.model.cost), averaged over every batch of the epoch's cut."""
    ds, total, batches = dm.train_set, 0.0, dm.train_batches(0)
    for b in batches:
        S, T = max(ds.src_lens[i] for i in b), max(ds.tgt_lens[i] for i in b)
        total += task.batch_flops({"src": torch.empty(len(b), S), "tgt_out": torch.empty(len(b), T)})
    return 3.0 * total / len(batches)


def time_steps(task, dm, warm: int, repeats: int, per_repeat: int, mean_flops: float) -> list[float]:
    """Seconds per training step of `repeats` repeats of `per_repeat` steps on real training batches (a fixed
    random draw of the epoch's), after `warm` untimed steps; each repeat's seconds scaled to the mean batch (by
    its FLOPs against mean_flops, mean_step_flops: the batches hold unequal shapes)."""
    batches = dm.train_batches(0)
    draw = random.Random(0).sample(range(len(batches)), warm + repeats * per_repeat)
    data = [_batch(dm, batches[i]) for i in draw]
    opt = adamw(task.model, lr=1e-4)
    task.train()
    out = []
    for r in range(-1, repeats):
        chunk = data[:warm] if r < 0 else data[warm + r * per_repeat : warm + (r + 1) * per_repeat]
        t0 = time.perf_counter()
        for batch in chunk:
            task.training_loss(batch).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        flops = sum(3.0 * task.batch_flops(b) for b in chunk)
        if r >= 0:
            out.append((time.perf_counter() - t0) / flops * mean_flops)
    return out


@torch.no_grad()
def time_evaluation(task, dm, timed: int = 4) -> float:
    """Seconds of one validation (every validation batch's loss), from `timed` evenly spaced batches."""
    batches = dm.eval_batches(dm.val_set)
    pick = [batches[k * len(batches) // timed] for k in range(min(timed, len(batches)))]
    task.eval()
    t0 = time.perf_counter()
    for i, b in enumerate(pick):
        task.objective_impl.eval_loss(collate_translation([dm.val_set[j] for j in b], dm.pad_id), i)
    task.train()
    return (time.perf_counter() - t0) / len(pick) * len(batches)


def time_scoring(task, dm, n: int) -> float:
    """Seconds of score_translations' decoding, from one chunk of its subset (an untrained model decodes to its
    length limit: an upper bound)."""
    ids = validation_subset(len(dm.val_set), n)
    t0 = time.perf_counter()
    translate_subset(task, dm.val_set, ids[:CHUNK], dm.pad_id)
    return (time.perf_counter() - t0) * len(ids) / min(CHUNK, len(ids))

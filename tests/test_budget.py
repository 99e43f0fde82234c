"""Budgets (zoo/budget.py), the training cost each run counts (TaskBase.cost), and what a run leaves for
zoo.report: results.json's new fields, examples.json, and a failed job's record."""

import json
import math

import pytest
import sacrebleu
import torch
from omegaconf import OmegaConf
from zoo_run import TINY, make_cfg, run_cli

from zoo.model import ModelConfig, build_model
from zoo.model.cost import forward_flops
from zoo.run.budget import BudgetError, apply_budget, cell_value
from zoo.run.train import run
from zoo.training.optim import BudgetCosine

# 8 windows of 32 characters a step: 256 tokens
STEP_TOKENS = 8 * 32


def tiny_lm(tmp_path, *extra, arch="decoder_only"):
    return make_cfg(tmp_path, [*TINY, "logger=csv", "trainer.val_check_interval=3", *extra], arch=arch)


def results(path):
    return json.loads((path / "results.json").read_text())


@pytest.mark.parametrize(
    "budget, message",
    [
        ({"kind": "epochs", "value": 3}, "budget.kind='epochs' is unknown"),
        ({"kind": "tokens", "value": None}, "budget.kind=tokens needs budget.value"),
        ({"kind": "flops", "value": -1.0}, "must be a positive, finite number of training FLOPs"),
        ({"kind": "time", "value": True}, "must be a positive, finite number of seconds"),
        ({"kind": "tokens", "value": float("nan")}, r"budget.value=nan must be a positive, finite number of tokens"),
        ({"kind": "time", "value": float("inf")}, r"budget.value=inf must be a positive, finite number of seconds"),
        ({"kind": "steps", "value": 2.5}, "a whole number of optimizer steps"),
    ],
)
def test_bad_budgets_are_refused(budget, message):
    cfg = OmegaConf.create({"budget": budget, "trainer": {"max_steps": 10, "max_epochs": -1}})
    with pytest.raises(BudgetError, match=message):
        apply_budget(cfg)


def test_budget_kinds_set_the_trainer():
    cfg = OmegaConf.create({"budget": {"kind": "steps", "value": None}, "trainer": {"max_steps": 7}})
    assert apply_budget(cfg) == {"kind": "steps", "value": 7}
    cfg = OmegaConf.create({"budget": {"kind": "steps", "value": 30}, "trainer": {"max_steps": 7}})
    assert apply_budget(cfg) == {"kind": "steps", "value": 30} and cfg.trainer.max_steps == 30
    cfg = OmegaConf.create({"budget": {"kind": "time", "value": 90}, "trainer": {"max_steps": 7, "max_epochs": 2}})
    assert apply_budget(cfg) == {"kind": "time", "value": 90.0}
    assert (cfg.trainer.max_steps, cfg.trainer.max_epochs) == (-1, -1)  # the budget alone stops the run
    assert cell_value("steps", {"steps": 400}) is None  # the cell's trainer.max_steps holds it
    assert cell_value("flops", {"flops": 2e12}) == 2e12
    with pytest.raises(BudgetError, match="compare.budgets.lm.time"):
        cell_value("time", {"time": None})


def test_budget_cosine_follows_the_spent_fraction():
    spent = [0.0]
    fn = BudgetCosine(warmup_steps=4, progress=lambda: spent[0], lr=1e-3, min_lr=1e-4)
    assert fn(0) == pytest.approx(0.25) and fn(3) == pytest.approx(1.0)  # warmup by steps
    for p, want in ((0.0, 1e-3), (0.5, 1e-4 + 0.5 * 9e-4), (1.0, 1e-4), (1.7, 1e-4)):
        spent[0] = p
        assert fn(100) * 1e-3 == pytest.approx(want)


def test_budget_cosine_warms_up_over_a_fraction_of_the_budget():
    """warmup_fraction: the warmup is linear in the spent fraction (the same compute for every architecture),
    whatever the step count; warmup_steps is then unused."""
    spent = [0.0]
    fn = BudgetCosine(warmup_steps=1000, progress=lambda: spent[0], lr=1e-3, min_lr=0.0, warmup_fraction=0.1)
    assert fn(0) == pytest.approx(1e-3)  # p = 0: the first step moves at lr / 1000
    spent[0] = 0.05
    assert fn(500) == pytest.approx(0.5)
    spent[0] = 0.099
    assert fn(1) == pytest.approx(0.99)  # near the peak at 10% spent, though only one step ran
    spent[0] = 0.1  # then the cosine of the whole spent fraction, as without a warmup
    assert fn(2) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.1)))
    spent[0] = 0.55
    assert fn(2) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.55)))


@pytest.mark.e2e
def test_tokens_budget_stops_at_the_first_step_that_reaches_it(tmp_path):
    """budget.kind=tokens: 10.5 steps' worth stops after step 11; cost counts 256 tokens a step and 3 x the
    forward FLOPs of the (8, 32) batch (zoo.model.cost), and the CSV log carries the cost at each validation."""
    run(tiny_lm(tmp_path, "budget.kind=tokens", f"budget.value={10.5 * STEP_TOKENS}"))
    res = results(tmp_path)
    assert res["steps"] == 11 and res["budget"] == {"kind": "tokens", "value": 10.5 * STEP_TOKENS}
    assert res["cost"]["tokens"] == 11 * STEP_TOKENS
    model = build_model(
        "decoder_only", ModelConfig(vocab_size=65, d_model=32, n_heads=2, d_ff=64, n_layers=2, max_len=64)
    )
    step_flops = 3 * forward_flops(model, 8, 32)["total"]
    assert res["cost"]["train_flops"] == pytest.approx(11 * step_flops, rel=1e-6)
    assert 0 < res["cost"]["train_seconds"] < res["wall_seconds"]
    rows = [r for r in (tmp_path / "csv" / "metrics.csv").read_text().splitlines()[1:] if r]
    header = (tmp_path / "csv" / "metrics.csv").read_text().splitlines()[0].split(",")
    col = {name: i for i, name in enumerate(header)}
    val_rows = [r.split(",") for r in rows if r.split(",")[col["val/loss"]]]
    assert len(val_rows) >= 3
    for r in val_rows:  # each validation row: the cost of the steps before it
        steps = int(r[col["step"]]) + 1  # logged at the 0-based index of the last training step
        assert float(r[col["cost/flops"]]) == pytest.approx(steps * step_flops, rel=1e-6)
        assert float(r[col["cost/tokens"]]) == steps * STEP_TOKENS


@pytest.mark.e2e
def test_flops_budget_and_its_schedule(tmp_path):
    """budget.kind=flops: stops at the first step past the value; the cosine reaches min_lr at the end."""
    model = build_model(
        "decoder_only", ModelConfig(vocab_size=65, d_model=32, n_heads=2, d_ff=64, n_layers=2, max_len=64)
    )
    step_flops = 3 * forward_flops(model, 8, 32)["total"]
    run(
        tiny_lm(
            tmp_path,
            "budget.kind=flops",
            f"budget.value={5.5 * step_flops}",
            "task.scheduler.warmup_steps=2",
            "task.scheduler.min_lr=1e-5",
        )
    )
    res = results(tmp_path)
    assert res["steps"] == 6 and res["budget"]["kind"] == "flops"
    # the lr the last step used: p = 5/5.5 of the budget spent before it
    p = 5 / 5.5
    assert res["final"]["lr"] == pytest.approx(1e-5 + 0.5 * (1 + math.cos(math.pi * p)) * (2e-3 - 1e-5), rel=1e-4)


@pytest.mark.e2e
def test_results_and_examples_of_a_prefix_lm_run(tmp_path):
    """results.json names the arch choice, seed and overrides; examples.json holds one continuation loss per
    validation window of the best validation, whose mean is that validation's val/cont_loss."""
    run(tiny_lm(tmp_path, "task=lm", "seed=3", arch="prefix_lm"))
    res = results(tmp_path)
    assert (res["status"], res["arch"], res["arch_config"], res["objective"], res["seed"]) == (
        "ok",
        "decoder_only",
        "prefix_lm",
        "prefix_lm",
        3,
    )
    assert res["examples"] == "examples.json"
    ex = json.loads((tmp_path / "examples.json").read_text())
    assert (ex["task"], ex["split"], ex["metric"], len(ex["loss"])) == ("lm", "val", "val/cont_loss", 16)
    assert ex["tokens"] == [17] * 16  # T - T/2 + 1 continuation tokens of a 32-character window
    assert sum(ex["loss"]) / 16 == pytest.approx(res["best"]["val/cont_loss"], rel=1e-5)
    assert res["best"]["val/loss"] == pytest.approx(res["best"]["val/cont_loss"])  # prefix LM: the same tokens
    assert res["cost"]["inference_flops_per_token"] == pytest.approx(res["flops_per_token"])
    assert res["cost"]["ms_per_example"] > 0
    chars = json.loads((tmp_path / "tokenizer.chars.json").read_text())  # the run's character table
    assert len(chars["chars"]) == 65


@pytest.mark.slow  # an end-to-end run; `pytest -m slow` runs it
@pytest.mark.e2e
def test_examples_of_classification_and_translation_give_their_test_scores(tmp_path):
    run(
        make_cfg(
            tmp_path / "cls",
            [
                "data.limit=320",
                "data.vocab_size=300",
                "data.batch_size=32",
                "logger=csv",
                "model.d_model=32",
                "model.n_heads=2",
                "model.d_ff=64",
                "model.n_layers=1",
                "trainer.max_steps=8",
                "trainer.max_epochs=-1",
                "trainer.val_check_interval=4",
            ],
            arch="encoder_only",
        )
    )
    res, ex = results(tmp_path / "cls"), json.loads((tmp_path / "cls" / "examples.json").read_text())
    assert ex["ids"] == sorted(ex["ids"]) and len(ex["ids"]) == len(set(ex["ids"]))
    # the tokenizer is in the run dir, the same as the checkpoint's
    ckpt = torch.load(res["best_checkpoint"], map_location="cpu", weights_only=True)
    assert (tmp_path / "cls" / "tokenizer.json").read_text() == ckpt["hyper_parameters"]["tokenizer"]["json"]
    acc = sum(p == y for p, y in zip(ex["pred"], ex["label"])) / len(ex["label"])
    assert acc == pytest.approx(res["final"]["test/acc"], abs=1e-6)
    run(
        make_cfg(
            tmp_path / "mt",
            [
                "data.limit=300",
                "data.vocab_size=300",
                "data.max_tokens=1024",
                "logger=csv",
                "model.d_model=32",
                "model.n_heads=2",
                "model.d_ff=64",
                "model.n_layers=1",
                "trainer.max_steps=6",
                "trainer.limit_val_batches=2",
                "trainer.limit_test_batches=2",
                "task.beam_size=2",
            ],
            arch="encoder_decoder",
        )
    )
    res, ex = results(tmp_path / "mt"), json.loads((tmp_path / "mt" / "examples.json").read_text())
    assert len(ex["hyp"]) == len(ex["ref"]) == len(ex["hyp_beam"]) > 0
    assert sacrebleu.corpus_bleu(ex["hyp"], [ex["ref"]]).score == pytest.approx(res["final"]["test/bleu"], abs=1e-4)
    assert sacrebleu.corpus_bleu(ex["hyp_beam"], [ex["ref"]]).score == pytest.approx(
        res["final"]["test/bleu_beam"], abs=1e-4
    )


@pytest.mark.e2e
def test_a_failed_job_leaves_a_failed_record_and_the_sweep_goes_on(tmp_path):
    """In a multirun, a job with bad input is recorded as failed (results.json status "failed", the error), the
    other jobs still run, and the sweep exits non-zero."""
    proc = run_cli(
        [
            "-m",
            "+arch=decoder_only",
            *TINY,
            "trainer.max_steps=2",
            "logger=csv",
            "model.activation=relu,bogus",
            f"hydra.sweep.dir={tmp_path}",
            "hydra.sweep.subdir=${hydra.job.num}",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    ok, failed = results(tmp_path / "0"), results(tmp_path / "1")
    assert ok["status"] == "ok" and ok["steps"] == 2
    assert failed["status"] == "failed" and "activation" in failed["error"] and "bogus" in failed["error"]
    assert failed["arch"] == "decoder_only" and "model.activation=bogus" in failed["overrides"]
    assert "zoo: error:" in proc.stderr


@pytest.mark.e2e
def test_a_failed_rerun_keeps_the_finished_runs_results(tmp_path):
    """A command that fails in the folder of a finished run (a refused extension of a scaling cell) leaves that
    run's results.json as it was, byte for byte, and writes its failure to failed.json beside it."""
    common = ["+arch=decoder_only", *TINY, "trainer.max_steps=2", "logger=csv", f"hydra.run.dir={tmp_path}"]
    assert run_cli(common, cwd=tmp_path).returncode == 0
    before = (tmp_path / "results.json").read_bytes()
    proc = run_cli([*common, "model.activation=bogus"], cwd=tmp_path)
    assert proc.returncode != 0 and "zoo: error:" in proc.stderr
    assert (tmp_path / "results.json").read_bytes() == before and json.loads(before)["status"] == "ok"
    failed = json.loads((tmp_path / "failed.json").read_text())
    assert failed["status"] == "failed" and "bogus" in failed["error"]


@pytest.mark.e2e
def test_a_resumed_run_keeps_its_csv_history(tmp_path):
    """Resuming into the same run dir: metrics.csv holds every step once, the first run's rows unchanged."""

    def train_losses():
        rows = [r for r in (tmp_path / "csv" / "metrics.csv").read_text().splitlines()]
        col = {n: i for i, n in enumerate(rows[0].split(","))}
        out = [(int(r.split(",")[col["step"]]), r.split(",")[col["train/loss"]]) for r in rows[1:]]
        return [(s, float(v)) for s, v in out if v]

    run(tiny_lm(tmp_path, "trainer.max_steps=5"))
    first = train_losses()
    assert [s for s, _ in first] == list(range(5))
    run(tiny_lm(tmp_path, "trainer.max_steps=10", f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}"))
    both = train_losses()
    assert [s for s, _ in both] == list(range(10))
    assert both[:5] == first


def test_a_budget_names_the_step_and_epoch_bounds_it_lifts():
    """With budget.kind tokens / flops / time, a command line's trainer.max_steps or max_epochs is lifted by
    apply_budget (the budget alone ends the run); ignored_bounds names them so the run warns, and a steps
    budget lifts nothing."""
    from zoo.run.budget import ignored_bounds

    overrides = ["+arch=decoder_only", "trainer.max_steps=50", "++trainer.max_epochs=3", "model.d_model=64"]
    assert ignored_bounds("time", overrides) == ["trainer.max_steps=50", "++trainer.max_epochs=3"]
    assert ignored_bounds("steps", overrides) == []
    assert ignored_bounds("tokens", ["trainer.max_steps_extra=1"]) == []

"""The main job end to end: results.json, exact resume, bad input, the command line."""

import csv
import hashlib
import json
import logging
import shutil
import warnings
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from test_schedules import cosine_lr, noam_lrate
from torch.utils.data import DataLoader, TensorDataset
from zoo_run import TINY, TINY_MODEL, make_cfg, run_cli

from zoo.data.resolver import DataError
from zoo.errors import ConfigError
from zoo.model import ModelConfig, build_model
from zoo.model.cost import flops_per_token, param_count
from zoo.run.train import run


def train_losses(run_dir):
    rows = list(csv.DictReader(open(Path(run_dir) / "csv" / "metrics.csv")))
    return [float(r["train/loss"]) for r in rows if r["train/loss"]]


def ckpt_hparams(run_dir):
    return torch.load(Path(run_dir) / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]


@pytest.mark.e2e
def test_run_writes_results_and_checkpoints(tmp_path, capsys):
    best = run(make_cfg(tmp_path, TINY + ["logger=csv", "task.scheduler.warmup_steps=1", "task.optimizer.lr=1e-2"]))
    results = json.loads((tmp_path / "results.json").read_text())
    assert capsys.readouterr().out.strip().splitlines()[-1] == str((tmp_path / "results.json").resolve())
    assert results["steps"] == 10 and results["arch"] == "decoder_only" and results["dataset"] == "tiny_shakespeare"
    assert results["best"]["val/loss"] == pytest.approx(best)
    assert set(results["final"]) >= {"train/loss", "val/loss", "val/ppl", "val/bpc", "lr", "tokens/s"}
    f = results["final"]
    assert f["val/ppl"] == pytest.approx(torch.tensor(f["val/loss"]).exp().item(), rel=1e-5)
    assert f["val/bpc"] == pytest.approx(f["val/loss"] / 0.6931471805599453, rel=1e-5)
    # 10 steps at lr 1e-2 must bring the loss well below the first step's (measured: 4.5 -> 3.4)
    assert f["val/loss"] < train_losses(tmp_path)[0] - 0.5
    model = build_model("decoder_only", ModelConfig(**ckpt_hparams(tmp_path)["model"]))
    assert results["params"] == param_count(model)
    # Kaplan's N: the params less the token and position tables (tied LM head), closed form for this model
    cfg = model.cfg
    assert results["params_non_embedding"] == results["params"] - cfg.vocab_size * cfg.d_model - (
        cfg.max_len * cfg.d_model if cfg.position == "learned" else 0
    )
    assert results["flops_per_token"] == flops_per_token(model, 32)
    assert 0 < results["wall_seconds"] < 300
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)  # plain data only
    assert ckpt["global_step"] == 10 and ckpt["hyper_parameters"]["arch"] == "decoder_only"
    assert not list((tmp_path / "checkpoints").glob("*.tmp"))  # atomic writes leave no temporaries


@pytest.mark.e2e
def test_resume_is_exact(tmp_path):
    """An uninterrupted 10-step run and a 5-step run resumed to 10 steps log the same losses (dropout on). The
    schedule (warm-up 2, cosine to step 10) does not depend on max_steps, so the 5-step run's is the first half
    of the 10-step run's."""
    base = TINY + ["logger=csv", "task.scheduler.warmup_steps=2", "task.scheduler.decay_steps=10"]
    run(make_cfg(tmp_path / "full", base))
    run(make_cfg(tmp_path / "half", base + ["trainer.max_steps=5"]))
    ckpt = tmp_path / "half" / "checkpoints" / "last.ckpt"
    run(make_cfg(tmp_path / "resumed", base + [f"ckpt_path={ckpt}"]))
    full, half, resumed = (train_losses(tmp_path / d) for d in ("full", "half", "resumed"))
    assert len(full) == 10 and len(half) == 5 and len(resumed) == 5
    assert half == full[:5]
    assert resumed == full[5:]
    steps = [
        [r["step"] for r in csv.DictReader(open(tmp_path / d / "csv" / "metrics.csv"))] for d in ("full", "resumed")
    ]
    assert steps[1] == steps[0][-len(steps[1]) :]  # the resumed run logs at the same steps as the uninterrupted one


@pytest.mark.e2e
def test_resume_with_more_steps_follows_the_new_schedule(tmp_path):
    """A 4-step run (cosine horizon 4 = its max_steps) resumed with trainer.max_steps=8 decays over 8
    steps: the lr it logs at each step s equals nanoGPT's cosine (warmup 1, decay 8, lr, min_lr), not the
    first run's horizon (torch's LambdaLR would restore that from the checkpoint)."""
    base = TINY + ["logger=csv", "task.scheduler.warmup_steps=1"]
    run(make_cfg(tmp_path / "a", base + ["trainer.max_steps=4"]))
    run(make_cfg(tmp_path / "b", base + ["trainer.max_steps=8", f"ckpt_path={tmp_path / 'a/checkpoints/last.ckpt'}"]))
    rows = [r for r in csv.DictReader(open(tmp_path / "b" / "csv" / "metrics.csv")) if r.get("lr")]
    assert [int(r["step"]) for r in rows] == [4, 5, 6, 7]
    for r in rows:
        assert float(r["lr"]) == pytest.approx(cosine_lr(int(r["step"]), 1, 8, 2e-3, 1e-4), rel=1e-6), r


def validate_checkpoint(cfg, ckpt) -> float:
    """val/loss of a checkpoint's weights, re-measured by a fresh Trainer.validate."""
    import lightning.pytorch as pl
    from hydra.utils import get_class, instantiate

    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup()
    task = get_class(cfg.task._target_).load_from_checkpoint(ckpt, weights_only=True)
    trainer = pl.Trainer(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    return trainer.validate(task, datamodule=dm, verbose=False)[0]["val/loss"]


@pytest.mark.parametrize(
    "extra, val_steps",
    [
        (["trainer.max_steps=7"], 2),  # epochs of 5: step 5, and the partial epoch's step 7
        (["trainer.max_steps=5", "trainer.val_check_interval=2"], 3),  # mid-epoch validations at 2, 4, and the end at 5
    ],
)
@pytest.mark.e2e
def test_every_validation_scores_the_weights_it_checkpoints(tmp_path, extra, val_steps):
    """Training that stops mid-epoch validates its final weights, and the best checkpoint holds exactly the
    weights that scored the best val/loss (also with mid-epoch val_check_interval validations)."""
    cfg = make_cfg(tmp_path, TINY + ["logger=csv", "task.scheduler.warmup_steps=1", "task.optimizer.lr=1e-2", *extra])
    run(cfg)
    results = json.loads((tmp_path / "results.json").read_text())
    rows = list(csv.DictReader(open(tmp_path / "csv" / "metrics.csv")))
    val = [float(r["val/loss"]) for r in rows if r.get("val/loss")]
    assert len(val) == val_steps
    assert results["final"]["val/loss"] == pytest.approx(val[-1], rel=1e-6)
    assert results["best"]["val/loss"] == pytest.approx(min(val), rel=1e-6)
    assert validate_checkpoint(cfg, results["best_checkpoint"]) == pytest.approx(min(val), rel=1e-5)
    assert validate_checkpoint(cfg, tmp_path / "checkpoints" / "last.ckpt") == pytest.approx(val[-1], rel=1e-5)


@pytest.mark.e2e
def test_checkpoint_from_other_model_is_refused(tmp_path):
    run(make_cfg(tmp_path / "a", TINY + ["logger=csv", "trainer.max_steps=5"]))
    ckpt = tmp_path / "a" / "checkpoints" / "last.ckpt"
    with pytest.raises(ConfigError, match="model settings"):
        run(make_cfg(tmp_path / "b", TINY + ["logger=csv", f"ckpt_path={ckpt}", "model.d_model=64"]))
    other = torch.load(ckpt, weights_only=True)
    other["hyper_parameters"]["arch"] = "encoder_only"
    torch.save(other, tmp_path / "other.ckpt")
    with pytest.raises(
        ConfigError, match="was trained with \\+arch=encoder_only, but this run is \\+arch=decoder_only"
    ):
        run(make_cfg(tmp_path / "c", TINY + ["logger=csv", f"ckpt_path={tmp_path / 'other.ckpt'}"]))
    with pytest.raises(ConfigError, match="does not exist"):
        run(make_cfg(tmp_path / "d", TINY + ["logger=csv", f"ckpt_path={tmp_path / 'missing.ckpt'}"]))
    with pytest.raises(ConfigError, match=f"is a folder; .* pass ckpt_path={ckpt}$"):  # the run dir: its last.ckpt
        run(make_cfg(tmp_path / "e", TINY + ["logger=csv", f"ckpt_path={tmp_path / 'a'}"]))


@pytest.mark.e2e
def test_bad_config_fails_before_training(tmp_path):
    with pytest.raises(ConfigError, match="data.block_size=128 is larger than model.max_len=64"):
        run(make_cfg(tmp_path, TINY + ["logger=csv", "data.block_size=128"]))
    with pytest.raises(ConfigError, match="model.mask=bidirectional would let decoder_only see"):
        run(make_cfg(tmp_path, TINY + ["logger=csv", "model.mask=bidirectional"]))
    with pytest.raises(ConfigError, match="data.batch_size=0 must be a positive integer"):
        run(make_cfg(tmp_path, TINY + ["logger=csv", "data.batch_size=0"]))
    with pytest.raises(ValueError, match="model.d_model=30 is not divisible by model.n_heads=4"):
        run(make_cfg(tmp_path, TINY + ["logger=csv", "model.d_model=30", "model.n_heads=4"]))


@pytest.mark.parametrize("content,match", [(b"", "is empty"), (b"abc\xff\xfedef", "not valid UTF-8")])
@pytest.mark.e2e
def test_bad_text_file(tmp_path, content, match):
    text = tmp_path / "my.txt"
    text.write_bytes(content)
    with pytest.raises(DataError, match=match):
        run(make_cfg(tmp_path / "run", TINY + ["logger=csv", f"data.file={text}"]))
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.e2e
def test_data_dir_without_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("ZOO_DATA_MIRROR", raising=False)
    monkeypatch.setattr("zoo.data.resolver.UPSTREAM", {"tiny_shakespeare": "http://127.0.0.1:9/"})
    with pytest.raises(DataError, match="tiny_shakespeare/input.txt"):
        run(make_cfg(tmp_path / "run", TINY + ["logger=csv", f"data.data_dir={tmp_path / 'empty'}"]))


@pytest.mark.e2e
def test_cli_without_arch_explains_and_fails(tmp_path):
    r = run_cli([], cwd=tmp_path, timeout=120)
    assert r.returncode != 0
    for arch in ("+arch=encoder_only", "+arch=decoder_only", "+arch=encoder_decoder"):
        assert arch in r.stderr


@pytest.mark.e2e
def test_cli_help_cfg_and_group_option(tmp_path):
    r = run_cli(["--help"], cwd=tmp_path, timeout=120)
    assert r.returncode == 0
    for group in (
        "arch:",
        "model:",
        "task:",
        "data:",
        "trainer:",
        "logger:",
        "callbacks:",
        "paths:",
        "debug:",
        "experiment:",
    ):
        assert group in r.stdout
    r = run_cli(["+arch=decoder_only", "--cfg", "job"], cwd=tmp_path, timeout=120)
    assert (
        r.returncode == 0 and "arch: decoder_only" in r.stdout and "_target_: zoo.tasks.lm.LanguageModeling" in r.stdout
    )
    r = run_cli(["+arch=decoder_only", "model=huge"], cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "model=huge is not an option of model; its options are: base, small, tiny" in r.stderr


@pytest.mark.e2e
def test_ddp_cpu_matches_one_process(tmp_path):
    """trainer=ddp_cpu (2 processes, gloo) from `python -m zoo` trains on the same global batches as one
    process: val/loss after 50 steps agrees within 1e-5 (measured: 2.4e-7, one float32 ulp of 3.36). Lightning's
    messages reach train.log and print once on the console."""
    args = [
        "+arch=decoder_only",
        *TINY,
        "model.dropout=0.0",
        "data.batches_per_epoch=25",
        "data.val_windows=32",
        "trainer.max_steps=50",
        "logger=csv",
        "task.sample=null",
        "callbacks=none",
    ]
    one = run_cli(args + [f"hydra.run.dir={tmp_path / 'one'}"], cwd=tmp_path)
    two = run_cli(args + ["trainer=ddp_cpu", f"hydra.run.dir={tmp_path / 'two'}"], cwd=tmp_path)
    assert one.returncode == 0, one.stderr[-2000:]
    assert two.returncode == 0, two.stderr[-2000:]
    r1 = json.loads((tmp_path / "one" / "results.json").read_text())
    r2 = json.loads((tmp_path / "two" / "results.json").read_text())
    assert r1["steps"] == r2["steps"] == 50
    assert abs(r1["final"]["val/loss"] - r2["final"]["val/loss"]) <= 1e-5
    assert two.stdout.strip().splitlines()[-1] == str((tmp_path / "two" / "results.json").resolve())
    log = (tmp_path / "one" / "train.log").read_text()  # Hydra's job log gets Lightning's and zoo's messages
    assert "`Trainer.fit` stopped: `max_steps=50` reached." in log
    assert (one.stdout + one.stderr).count("`Trainer.fit` stopped") == 1  # on the console once, not twice
    assert f"'val/loss': {float(format(r1['final']['val/loss'], '.5g'))}" in log  # 5 significant digits


@pytest.mark.e2e
def test_generate_cli_samples_from_checkpoint(tmp_path, capsys):
    """python -m zoo.generate reads a checkpoint with weights_only=True and continues the prompt; with a
    seed the text is reproducible, and greedy (temperature 0) equals the model's own greedy generate."""
    from zoo.run.generate import load, main, sample

    run(make_cfg(tmp_path, TINY + ["logger=csv"]))
    ckpt = str(tmp_path / "checkpoints" / "last.ckpt")
    capsys.readouterr()
    assert (
        main([f"ckpt_path={ckpt}", "prompt=ROMEO:", "max_new_tokens=100", "temperature=0.8", "top_k=40", "seed=3"]) == 0
    )
    text = capsys.readouterr().out.rstrip("\n")
    assert text.startswith("ROMEO:") and len(text) == len("ROMEO:") + 100  # one character per token
    model, tok, context_len = load(ckpt)
    assert context_len == 32  # TINY's data.block_size, kept in the checkpoint
    assert sample(model, tok, "ROMEO:", 100, 0.8, 40, seed=3, context_len=context_len) == text
    greedy = model.generate(torch.tensor([tok.encode("ROMEO:")]), 20, temperature=0.0)
    assert sample(model, tok, "ROMEO:", 20, 0.0) == tok.decode(greedy[0].tolist())
    assert main(["prompt=x"]) == 2  # no ckpt_path: usage, exit status 2
    capsys.readouterr()  # the run's directory names its checkpoint (results.json's best, else last.ckpt)
    assert main([f"ckpt_path={tmp_path}", "prompt=ROMEO:", "max_new_tokens=10", "seed=3"]) == 0
    assert capsys.readouterr().out.rstrip("\n").startswith("ROMEO:")


@pytest.mark.e2e
def test_sampling_never_feeds_more_context_than_training(tmp_path):
    """With block_size 32 and max_len 64, every generate call of a 100-token sample sees at most 32 tokens
    (positions 32..63 of learned embeddings were never trained), and the output keeps every token."""
    from zoo.run.generate import load, sample

    run(make_cfg(tmp_path, TINY + ["logger=csv"]))
    model, tok, context_len = load(str(tmp_path / "checkpoints" / "last.ckpt"))
    calls = []
    generate = model.generate

    def spy(idx, n, **kw):
        calls.append(idx.shape[1] + n)
        return generate(idx, n, **kw)

    model.generate = spy
    text = sample(model, tok, "ROMEO:", 100, 0.0, context_len=context_len)
    assert len(text) == 106 and max(calls) <= 32 and len(calls) > 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["ckpt_path=/nonexistent.ckpt"], "does not exist"),
        (["ckpt_path=CKPT", "max_new_tokens=-5"], "max_new_tokens=-5"),
        (["ckpt_path=CKPT", "temperature=hot"], "temperature='hot'"),
        (["ckpt_path=CKPT", "top_k=0"], "top_k=0"),
        (["ckpt_path=CKPT", "seed=-3"], "seed=-3 must be a non-negative integer"),
        (["ckpt_path=CKPT", "top_p=1.5"], "top_p=1.5"),
        (["ckpt_path=CKPT", "prompt=\u00e9\u00e9"], "not in the tokenizer's vocabulary"),
        (["ckpt_path=NOTCKPT"], "not a readable checkpoint"),
    ],
)
@pytest.mark.e2e
def test_generate_cli_bad_input_is_a_clear_error(tmp_path, capsys, args, message):
    """Bad zoo.generate arguments exit with status 2 and one message naming the problem, no traceback."""
    from zoo.run.generate import main

    ckpt = tmp_path / "x.ckpt"
    if any("CKPT" in a for a in args):
        run(make_cfg(tmp_path, TINY + ["logger=csv", "trainer.max_steps=1"]))
        ckpt = tmp_path / "checkpoints" / "last.ckpt"
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    args = [a.replace("NOTCKPT", str(bad)).replace("CKPT", str(ckpt)) for a in args]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo.generate: error:") and message in err and "Traceback" not in err


@pytest.mark.e2e
def test_bf16_mixed_and_gradient_accumulation(tmp_path):
    """trainer.precision=bf16-mixed (CPU autocast) and accumulate_grad_batches=2: 10 optimizer steps
    consume 20 batches (the data stream advances by 2 batches per step) and the loss still falls."""
    run(
        make_cfg(
            tmp_path,
            TINY
            + [
                "logger=csv",
                "trainer.precision=bf16-mixed",
                "trainer.accumulate_grad_batches=2",
                "data.batches_per_epoch=10",  # even: no partial accumulation at epoch ends
                "task.scheduler.warmup_steps=1",
                "task.optimizer.lr=1e-2",
            ],
        )
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] == 10
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["loops"]["fit_loop"]["epoch_loop.batch_progress"]["total"]["completed"] == 20
    losses = train_losses(tmp_path)
    assert results["final"]["val/loss"] < losses[0] - 0.3


def tensorboard_scalars(path) -> dict:
    """{tag: [(step, value)]} from a TensorBoard event file (TFRecord framing: u64 length, u32 crc, data, u32 crc)."""
    import struct

    from tensorboardX.proto import event_pb2

    data, out, i = Path(path).read_bytes(), {}, 0
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i : i + 8])
        event = event_pb2.Event.FromString(data[i + 12 : i + 12 + n])
        i += 12 + n + 4
        for v in event.summary.value:
            out.setdefault(v.tag, []).append((event.step, v.simple_value))
    return out


@pytest.mark.e2e
def test_tensorboard_logger_writes_the_logged_metrics(tmp_path):
    """logger=tensorboard writes event files holding the same val/loss as the CSV log and results.json."""
    run(make_cfg(tmp_path, TINY + ["logger=tensorboard"]))
    (events,) = (tmp_path / "tensorboard").glob("events.out.tfevents.*")
    scalars = tensorboard_scalars(events)
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(scalars["train/loss"]) == 10
    assert scalars["val/loss"][-1][1] == pytest.approx(results["final"]["val/loss"], rel=1e-6)


@pytest.mark.e2e
def test_checkpoint_of_another_task_or_an_unreadable_file_is_refused(tmp_path):
    """A decoder_only classification checkpoint given to an lm run, a garbage file, and a checkpoint that
    already reached max_steps are refused with ConfigError before any data work."""
    run(make_cfg(tmp_path / "lm", TINY + ["logger=csv", "trainer.max_steps=2"]))
    ckpt = tmp_path / "lm" / "checkpoints" / "last.ckpt"
    other = torch.load(ckpt, weights_only=True)
    assert other["zoo_task"] == "LanguageModeling"
    other["zoo_task"] = "Classification"
    torch.save(other, tmp_path / "cls.ckpt")
    with pytest.raises(ConfigError, match="trained by task Classification, but this run's task is LanguageModeling"):
        run(make_cfg(tmp_path / "a", TINY + ["logger=csv", f"ckpt_path={tmp_path / 'cls.ckpt'}"]))
    (tmp_path / "junk.ckpt").write_bytes(b"junk")
    with pytest.raises(ConfigError, match="not a readable checkpoint"):
        run(make_cfg(tmp_path / "b", TINY + ["logger=csv", f"ckpt_path={tmp_path / 'junk.ckpt'}"]))
    with pytest.raises(ConfigError, match="already trained 2 steps; resuming needs trainer.max_steps above"):
        run(make_cfg(tmp_path / "c", TINY + ["logger=csv", "trainer.max_steps=2", f"ckpt_path={ckpt}"]))


@pytest.mark.parametrize(
    "overrides, arch, message",
    [
        (["task.scheduler.kind=linear"], "decoder_only", "task.scheduler.kind='linear' is unknown"),
        (["task.scheduler.warmup_steps=0"], "encoder_decoder", "noam needs task.scheduler.warmup_steps >= 1"),
        (["model.share_embeddings=true", "data.joint_vocab=false"], "encoder_decoder", "set data.joint_vocab=true"),
        (
            ["task.monitor=val/los"],
            "decoder_only",
            "task.monitor=val/los is not a validation metric of LanguageModeling",
        ),
        (["task.monitor=val/accuracy"], "encoder_only", "it logs val/loss, val/acc, val/f1"),
        (
            ["task.monitor=val/mlm_acc"],
            "decoder_only",  # only the masked LM (encoder_only) logs it
            "not a validation metric of LanguageModeling with \\+arch=decoder_only; it logs val/loss, val/ppl, "
            "val/bpc, val/cont_loss$",
        ),
        (["task.monitor_mode=maximum"], "encoder_decoder", "task.monitor_mode='maximum' is unknown"),
        (
            ["task.monitor=val/loss"],
            "encoder_only",  # classification's mode is max: the best checkpoint would be the worst
            "task.monitor=val/loss is better lower, but task.monitor_mode=max; add task.monitor_mode=min",
        ),
        (
            ["task=lm", "data=tiny_shakespeare", "task.monitor=val/mlm_acc"],
            "encoder_only",
            "task.monitor=val/mlm_acc is better higher, but task.monitor_mode=min; add task.monitor_mode=max",
        ),
        (
            ["callbacks.model_checkpoint.mode=min"],
            "encoder_only",  # the callback's own keys are checked too
            "callbacks.model_checkpoint.monitor=val/acc is better higher, but callbacks.model_checkpoint.mode=min; add "
            "callbacks.model_checkpoint.mode=max",
        ),
        (
            ["callbacks.model_checkpoint.monitor=val/los"],
            "encoder_only",
            "callbacks.model_checkpoint.monitor=val/los is not",
        ),
        (
            ["task.monitor=val/loss", "task.monitor_mode=min", "+optimized_metric=val/acc"],
            "encoder_only",
            "task.monitor=val/loss and optimized_metric=val/acc point in opposite directions",
        ),
        (["+optimized_metric=val/BLEU"], "encoder_decoder", "optimized_metric=val/BLEU is not a validation metric"),
        # special ids: a collision (pad = eos: the loss would ignore every EOS), or an id the data's tokenizer does
        # not use, in every task
        (["model.pad_id=2"], "decoder_only", "model.pad_id=2 and model.eos_id=2 are the same id"),
        (["model.pad_id=2"], "encoder_only", "model.pad_id=2 and model.eos_id=2 are the same id"),
        (["model.bos_id=0"], "encoder_decoder", "model.pad_id=0 and model.bos_id=0 are the same id"),
        (
            ["model.pad_id=7"],
            "encoder_only",
            "model.pad_id=7, but data=SST2's tokenizer puts that token at 0; set model.pad_id=0",
        ),
        (["model.eos_id=3"], "encoder_decoder", "model.eos_id=3, but data=Multi30k's tokenizer puts that token at 2"),
        (
            ["task=translation", "data=multi30k", "model.bos_id=5"],
            "decoder_only",
            "model.bos_id=5, but data=Multi30k's",
        ),
        (
            ["task.early_stopping=sometimes"],
            "encoder_decoder",
            "task.early_stopping='sometimes' is unknown; allowed: true, false, never",
        ),
    ],
)
@pytest.mark.e2e
def test_contradictory_settings_are_refused(tmp_path, overrides, arch, message):
    with pytest.raises(ConfigError, match=message):
        run(make_cfg(tmp_path, overrides + ["logger=csv"], arch=arch))


@pytest.mark.parametrize(
    "overrides, monitor, mode",
    [
        (
            ["task.monitor=val/loss", "task.monitor_mode=min"],
            "val/loss",
            "min",
        ),  # classification's default: val/acc, max
        (
            ["task=lm", "data=tiny_shakespeare", "task.monitor=val/mlm_acc", "task.monitor_mode=max"],
            "val/mlm_acc",
            "max",
        ),
    ],
)
def test_monitor_with_its_direction_is_accepted(tmp_path, overrides, monitor, mode):
    """A monitor other than the task's default, given with its own direction, passes check_config, and the
    best-checkpoint callback built from the config keeps the best by it, in that direction."""
    from hydra.utils import instantiate

    from zoo.run.checks.config import check_config

    cfg = make_cfg(tmp_path, overrides, arch="encoder_only")
    check_config(cfg)
    best = instantiate(cfg.callbacks.model_checkpoint)
    assert (best.monitor, best.mode) == (monitor, mode)


@pytest.mark.e2e
def test_constructor_errors_exit_2_with_one_message(tmp_path):
    """A datamodule's own refusal (a language pair without files) reaches the user as `zoo: error:`, exit 2."""
    out = run_cli(
        ["+arch=encoder_decoder", "data.src_lang=xx", "logger=csv", f"hydra.run.dir={tmp_path}"], cwd=tmp_path
    )
    assert out.returncode == 2 and "zoo: error: Multi30k split" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.e2e
def test_callbacks_none_writes_no_checkpoint(tmp_path):
    """callbacks=none: no checkpoint anywhere under the run dir (Lightning's default ModelCheckpoint used to
    write csv/checkpoints/epoch=0-step=10.ckpt) and results.json names none; zoo's progress bar replaces
    Lightning's default one; trainer.* settings win."""
    from zoo.run.train import trainer_callbacks
    from zoo.training.callbacks.progress import ProgressBar

    run(make_cfg(tmp_path, TINY + ["logger=csv", "callbacks=none", "task.sample=null"]))
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] == 10 and results["best_checkpoint"] is None
    assert not list(tmp_path.rglob("*.ckpt"))
    kwargs = trainer_callbacks([], make_cfg(tmp_path, TINY).trainer)
    assert kwargs["enable_checkpointing"] is False and [type(c) for c in kwargs["callbacks"]] == [ProgressBar]
    quiet = make_cfg(tmp_path, TINY + ["+trainer.enable_progress_bar=false", "+trainer.enable_checkpointing=true"])
    assert trainer_callbacks([], quiet.trainer) == {"callbacks": []}
    assert trainer_callbacks([ProgressBar()], quiet.trainer) == {"callbacks": []}  # default callbacks, bar off


@pytest.mark.e2e
def test_progress_bar_off_with_the_default_callbacks(tmp_path):
    """+trainer.enable_progress_bar=false with callbacks=default trains (Lightning refused the default bar's
    callback: "Trainer was configured with enable_progress_bar=False but found ProgressBar")."""
    run(make_cfg(tmp_path, TINY + ["logger=csv", "task.sample=null", "+trainer.enable_progress_bar=false"]))
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == 10
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.parametrize("max_epochs,expected", [(-1, "Epoch 3"), (10, "Epoch 3/9")])
def test_progress_bar_epoch_label(max_epochs, expected):
    """zoo's rich progress bar names the epoch without Lightning's "Epoch 3/-2" when max_steps bounds the
    run (max_epochs=-1), and with the last epoch's index when max_epochs does."""
    from types import SimpleNamespace

    from zoo.training.callbacks.progress import ProgressBar

    bar = ProgressBar()
    bar._trainer = SimpleNamespace(max_epochs=max_epochs)
    assert bar._get_train_description(3).rstrip() == expected


def test_progress_bar_updates_at_most_refresh_rate_times_a_second(monkeypatch):
    """zoo's bar hands a training batch to Lightning's update (count and metrics) only when 1 / refresh_rate
    seconds have passed since the last one, and always on the first batch, the epoch's last batch and the step
    at which trainer.max_steps ends the run: 100 batches 1/32 s apart at refresh_rate 8 are 25 updates (every
    fourth batch from the first), plus the last one. (Binary fractions of a second: exact sums.)"""
    from types import SimpleNamespace

    from lightning.pytorch.callbacks import RichProgressBar

    import zoo.training.callbacks.progress as progress

    updated = []
    monkeypatch.setattr(RichProgressBar, "on_train_batch_end", lambda self, t, m, o, b, i: updated.append(i + 1))
    monkeypatch.setattr(RichProgressBar, "on_train_epoch_start", lambda self, t, m: None)
    clock = [1000.0]
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    bar = progress.ProgressBar(refresh_rate=8)
    trainer = SimpleNamespace(max_steps=100, global_step=0, num_training_batches=float("inf"))
    bar._trainer = trainer
    bar.on_train_epoch_start(trainer, None)
    for i in range(100):
        trainer.global_step = i + 1
        bar.on_train_batch_end(trainer, None, None, None, i)
        clock[0] += 1 / 32
    assert updated == [*range(1, 100, 4), 100]
    updated.clear()  # an epoch of 7 batches ends on an update; the next epoch starts with one
    trainer.max_steps, trainer.num_training_batches = -1, 7
    bar.on_train_epoch_start(trainer, None)
    for i in range(7):
        bar.on_train_batch_end(trainer, None, None, None, i)
        clock[0] += 1 / 32
    assert updated == [1, 5, 7]


# ---- results.json's best_checkpoint: the file the test scored ----------------------------------------------


def weights_digest(state_dict: dict) -> str:
    """A digest of a state_dict's names and tensor bytes."""
    h = hashlib.sha256()
    for name in sorted(state_dict):
        h.update(name.encode())
        h.update(state_dict[name].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class Probe(pl.Callback):
    """Appends JSON lines to `path`: each validation's step and monitored score, and at the start of the test
    phase the checkpoint trainer.test loaded (trainer.ckpt_path) and a digest of the weights it scores."""

    def __init__(self, path: str):
        self.path = Path(path)

    def _write(self, **row) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            monitor = pl_module.hparams.monitor
            self._write(kind="val", step=trainer.global_step, score=float(trainer.callback_metrics[monitor]))

    def on_test_start(self, trainer, pl_module):
        path = str(trainer.ckpt_path) if trainer.ckpt_path else None
        self._write(kind="test", ckpt_path=path, digest=weights_digest(pl_module.state_dict()))


CLASSIFICATION = [
    *TINY_MODEL,
    "trainer.enable_model_summary=false",
    "data.limit=80",  # epochs of 5 batches
    "data.batch_size=16",
    "data.vocab_size=300",
    "model.max_len=128",
    "trainer.limit_val_batches=2",
    "trainer.limit_test_batches=1",
]
TRANSLATION = [
    *TINY_MODEL,
    "trainer.enable_model_summary=false",
    "data.limit=30",
    "data.vocab_size=300",
    "data.max_tokens=512",
    "task.beam_size=1",
    "task.max_len_b=2",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
]
BY_LOSS = ["task.monitor=val/loss", "task.monitor_mode=min"]  # scores that differ at every validation
CKPT_CASES = {  # (arch, overrides, the steps that validate): epochs of 5 batches
    "lm, max_steps between validations": ("decoder_only", TINY + ["task.sample=null", "trainer.max_steps=7"], [5, 7]),
    "classification, only the forced validation": ("encoder_only", CLASSIFICATION + ["trainer.max_steps=3"], [3]),
    "classification, val_check_interval": (
        "encoder_only",
        CLASSIFICATION + BY_LOSS + ["trainer.val_check_interval=2", "trainer.max_steps=8"],
        [2, 4, 7, 8],  # batches 2 and 4 of each epoch (not its last, 5), and the forced one
    ),
    "translation, val_check_interval": (
        "encoder_decoder",
        TRANSLATION + BY_LOSS + ["trainer.val_check_interval=2", "trainer.max_steps=3"],
        [2, 3],
    ),
}


@pytest.mark.parametrize("case", list(CKPT_CASES))
@pytest.mark.e2e
def test_best_checkpoint_is_the_file_the_test_scored(tmp_path, case):
    """results.json's best_checkpoint exists, is the file trainer.test loaded, holds the very weights the test
    scored, and is the best validation's checkpoint by task.monitor (lm, without a test: the best validation's
    file), for every task, with val_check_interval, and when max_steps ends the run between two validations
    (its forced validation scored and saved; loading that checkpoint to test it restores the callback state
    from before the forced score, which named a deleted file, or none)."""
    arch, overrides, val_steps = CKPT_CASES[case]
    record = tmp_path / "probe.jsonl"
    probe = ["+callbacks.probe._target_=test_train.Probe", f"+callbacks.probe.path={record}"]
    cfg = make_cfg(tmp_path / "run", [*overrides, "logger=csv", "task.scheduler.warmup_steps=1", *probe], arch=arch)
    run(cfg)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    vals, tests = [r for r in rows if r["kind"] == "val"], [r for r in rows if r["kind"] == "test"]
    assert [r["step"] for r in vals] == val_steps
    best = results["best_checkpoint"]
    assert best is not None and Path(best).is_file() and Path(best).parent == tmp_path / "run" / "checkpoints"
    ckpt = torch.load(best, map_location="cpu", weights_only=True)
    better = min if cfg.task.monitor_mode == "min" else max
    first_best = next(r for r in vals if r["score"] == better(v["score"] for v in vals))  # ties: the first saved
    assert ckpt["global_step"] == first_best["step"]
    assert results["best"][cfg.task.monitor] == pytest.approx(first_best["score"], rel=1e-6)
    if arch == "decoder_only":
        assert tests == []  # lm has no test phase
        return
    assert len(tests) == 1 and tests[0]["ckpt_path"] == best
    assert weights_digest(ckpt["state_dict"]) == tests[0]["digest"]


class Scripted(pl.LightningModule):
    """One weight, trained toward each batch's value; validation scores val/score = scores[global_step]
    (default: `rest`), higher is better. Reaching max_steps mid-epoch forces a validation, as TaskBase does.
    test/w logs the weight it tests."""

    def __init__(self, scores: dict, rest: float):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.scores, self.rest = scores, rest

    def training_step(self, batch, batch_idx):
        return ((self.w - batch[0]) ** 2).sum()

    def on_train_batch_end(self, outputs, batch, batch_idx):
        from zoo.training.callbacks.checkpoint import validation_due

        if 0 < self.trainer.max_steps <= self.trainer.global_step:
            self.trainer.should_stop = True
            self.stop_validation = not validation_due(self.trainer, batch_idx)

    def validation_step(self, batch, batch_idx):
        pass

    def on_validation_epoch_end(self):
        self.log("val/score", self.scores.get(self.trainer.global_step, self.rest))

    def test_step(self, batch, batch_idx):
        self.log("test/w", self.w.sum())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.arange(1.0, 6.0).unsqueeze(1)), batch_size=1)  # epochs of 5

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(1, 1)), batch_size=1)

    def test_dataloader(self):
        return self.val_dataloader()


def scripted_run(ckpt_dir: Path, max_steps: int, scores: dict, rest: float, ckpt_path=None):
    """fit_and_test on Scripted with zoo's two checkpoint callbacks (conf/callbacks/default.yaml), validating
    every 2 batches; returns (the checkpoint fit_and_test reports, test/w)."""
    from omegaconf import OmegaConf

    from zoo.run.train import fit_and_test
    from zoo.training.callbacks.checkpoint import BestCheckpoint

    best = BestCheckpoint(
        dirpath=ckpt_dir,
        filename="step{step}",
        auto_insert_metric_name=False,
        monitor="val/score",
        mode="max",
        save_top_k=1,
        save_on_train_epoch_end=False,
    )
    last = ModelCheckpoint(
        dirpath=ckpt_dir,
        filename="last",
        monitor=None,
        save_top_k=1,
        save_on_train_epoch_end=True,
        enable_version_counter=False,
    )
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=max_steps,
        val_check_interval=2,
        num_sanity_val_steps=0,
        callbacks=[best, last],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    task = Scripted(scores, rest)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few batches, non-resumable loader
        final, _, ckpt = fit_and_test(OmegaConf.create({"ckpt_path": ckpt_path}), trainer, task, None, None)
    return ckpt, final["test/w"]


def test_best_checkpoint_survives_a_forced_score_and_a_resume(tmp_path):
    """max_steps=3 forces a validation at step 3 that beats step 2's: the test scores step3.ckpt, and results
    name it (Lightning's restored callback state named step2.ckpt, deleted by then). Resumed to step 10 with no
    later score beating step 2's, the run continues the uninterrupted run's choice: step2.ckpt, still on disk,
    is tested (it was deleted, and the test failed); a later better score replaces it."""
    d = tmp_path / "checkpoints"
    ckpt, w = scripted_run(d, 3, {2: 0.5, 3: 0.7}, rest=0.0)
    assert ckpt == str(d / "step3.ckpt") and Path(ckpt).is_file()
    assert w == torch.load(ckpt, weights_only=True)["state_dict"]["w"].item()
    assert (d / "step2.ckpt").is_file()  # kept for a resumed run
    ckpt, w = scripted_run(d, 10, {}, rest=0.4, ckpt_path=d / "last.ckpt")  # validations at 4, 5, 7, 9, 10
    assert ckpt == str(d / "step2.ckpt") and Path(ckpt).is_file()
    assert w == torch.load(ckpt, weights_only=True)["state_dict"]["w"].item()
    assert w != torch.load(d / "step3.ckpt", weights_only=True)["state_dict"]["w"].item()
    shutil.rmtree(d)
    scripted_run(d, 3, {2: 0.5, 3: 0.7}, rest=0.0)
    ckpt, w = scripted_run(d, 10, {7: 0.6}, rest=0.4, ckpt_path=d / "last.ckpt")
    assert ckpt == str(d / "step7.ckpt") and not (d / "step2.ckpt").exists()
    assert w == torch.load(ckpt, weights_only=True)["state_dict"]["w"].item()


# ---- the warm-up fits in the run -----------------------------------------------------------------------------


def test_warmup_longer_than_max_steps_refused_if_given_scaled_if_configured(tmp_path, caplog):
    """The issue's case, translation (noam, 300 warm-up steps by default) with trainer.max_steps=150: the
    config's warm-up is scaled to a tenth of the run, 15 steps, with a warning naming both; the same warm-up
    given on the command line is refused (ConfigError: both keys and the fix). One that fits is kept."""
    from zoo.training.schedule_fit import check_schedule, warmup_overridden

    cfg = make_cfg(tmp_path, ["trainer.max_steps=150"], arch="encoder_decoder")
    assert cfg.task.scheduler.warmup_steps == 300
    with caplog.at_level(logging.WARNING, logger="zoo"):
        check_schedule(cfg, ["+arch=encoder_decoder", "trainer.max_steps=150"])
    assert cfg.task.scheduler.warmup_steps == 15
    assert "task.scheduler.warmup_steps=300 is longer than the run (trainer.max_steps=150)" in (caplog.text)
    assert "warming up over 15 steps" in caplog.text
    overrides = ["+arch=encoder_decoder", "trainer.max_steps=150", "task.scheduler.warmup_steps=300"]
    cfg = make_cfg(tmp_path, overrides[1:], arch="encoder_decoder")
    message = (
        r"task\.scheduler\.warmup_steps=300 is longer than the run \(trainer\.max_steps=150\).*"
        r"Set task\.scheduler\.warmup_steps=15 .* or raise trainer\.max_steps to at least 300"
    )
    with pytest.raises(ConfigError, match=message):
        check_schedule(cfg, overrides)
    for steps, warmup in ((300, 300), (1000, 300)):  # fits (equal included): unchanged
        cfg = make_cfg(tmp_path, [f"trainer.max_steps={steps}"], arch="encoder_decoder")
        check_schedule(cfg, [f"task.scheduler.warmup_steps={warmup}"])
        assert cfg.task.scheduler.warmup_steps == warmup
    assert warmup_overridden(["++task.scheduler.warmup_steps=3"]) and warmup_overridden(
        ["+task.scheduler.warmup_steps=3"]
    )
    assert not warmup_overridden(["task.scheduler.warmup_fraction=0.1", "trainer.max_steps=3"])


@pytest.mark.e2e
def test_warmup_longer_than_max_steps_exits_2_before_work(tmp_path):
    out = run_cli(
        [
            "+arch=encoder_decoder",
            "trainer.max_steps=150",
            "task.scheduler.warmup_steps=300",
            "logger=csv",
            f"hydra.run.dir={tmp_path}",
        ],
        cwd=tmp_path,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "zoo: error: task.scheduler.warmup_steps=300 is longer than the run (trainer.max_steps=150)" in out.stderr
    assert not (tmp_path / "checkpoints").exists() and not list(tmp_path.glob("tokenizer*"))


@pytest.mark.parametrize("bad", [0, 1.5, -0.1, "abc"])
def test_warmup_fraction_must_be_a_share_of_the_budget(tmp_path, bad):
    from zoo.training.schedule_fit import check_schedule

    cfg = make_cfg(tmp_path, [f"task.scheduler.warmup_fraction={bad}"])
    with pytest.raises(ConfigError, match=r"task\.scheduler\.warmup_fraction=.* must be a share of the budget in"):
        check_schedule(cfg, [])


@pytest.mark.parametrize(
    "over",
    [
        ["task.scheduler.warmup_steps=-5"],
        ["task.scheduler.warmup_steps=2.5"],
        ["task.scheduler.warmup_steps=abc"],
        ["task.scheduler.warmup_steps=true"],
    ],
)
def test_warmup_steps_must_be_a_whole_number_of_steps(tmp_path, over):
    """A negative warm-up starts mid-cosine and a fractional one overshoots the peak lr: both are refused (noam's
    warm-up of 0: test_contradictory_settings_are_refused)."""
    from zoo.run.checks.config import check_config

    cfg = make_cfg(tmp_path, over)
    with pytest.raises(ConfigError, match=r"task\.scheduler\.warmup_steps=.* must be a whole number of optimizer"):
        check_config(cfg)


def test_a_fitting_warmup_of_zero_cosine_steps_is_kept(tmp_path):
    from zoo.training.schedule_fit import check_schedule

    cfg = make_cfg(tmp_path, ["task.scheduler.warmup_steps=0", "trainer.max_steps=10"])
    check_schedule(cfg, [])
    assert cfg.task.scheduler.warmup_steps == 0


def lr_rows(run_dir) -> dict:
    """{step: lr} of a run's CSV log."""
    rows = csv.DictReader(open(Path(run_dir) / "csv" / "metrics.csv"))
    return {int(r["step"]): float(r["lr"]) for r in rows if r.get("lr")}


@pytest.mark.e2e
def test_scaled_warmups_are_the_schedule_the_run_follows(tmp_path, caplog):
    """Translation's default noam warm-up (300) in a 20-step run warms up over 2 steps: the logged lr is
    Vaswani et al.'s eq. 3 (warm-up 2) scaled to the peak 1e-3 at every step, and the checkpoint records
    warmup_steps=2.
    Classification bounded by epochs (1 epoch of 5 steps) scales its cosine warm-up (100) once the step count
    is known: nanoGPT's cosine (warm-up 1, decay 5, 5e-4 to 1e-5), with the warning naming the epochs."""
    with caplog.at_level(logging.WARNING, logger="zoo"):
        run(make_cfg(tmp_path / "t", TRANSLATION + ["logger=csv", "trainer.max_steps=20"], arch="encoder_decoder"))
    lr = lr_rows(tmp_path / "t")
    assert sorted(lr) == list(range(20)) and max(lr.values()) == pytest.approx(1e-3, rel=1e-6)
    for s, v in lr.items():
        assert v == pytest.approx(1e-3 * noam_lrate(s + 1, 512, 2) / noam_lrate(2, 512, 2), rel=1e-6), s
    assert ckpt_hparams(tmp_path / "t")["scheduler"]["warmup_steps"] == 2
    assert "warming up over 2 steps" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zoo"):
        overrides = CLASSIFICATION + ["logger=csv", "trainer.max_steps=-1", "trainer.max_epochs=1"]
        run(make_cfg(tmp_path / "c", overrides, arch="encoder_only"))
    lr = lr_rows(tmp_path / "c")
    assert sorted(lr) == list(range(5))
    for s, v in lr.items():
        assert v == pytest.approx(cosine_lr(s, 1, 5, 5e-4, 1e-5), rel=1e-6), s
    assert "longer than the run (the 5 optimizer steps of trainer.max_epochs=1)" in caplog.text


def test_budget_run_warns_when_its_step_warmup_outlasts_it(caplog):
    """A tokens / FLOPs / time budget has no step count in advance: StepWarmupWatch estimates it from the spent
    share (step / progress once 10% is spent) and warns once when the warm-up (300 steps) outlasts it (150);
    the multiplier is the schedule's own, and a run long enough is not warned about."""
    from zoo.training.optim import Noam, StepWarmupWatch

    for total, warned in ((150, True), (400, False)):
        caplog.clear()
        spent = [0.0]
        watch = StepWarmupWatch(Noam(300), 300, lambda: spent[0])
        with caplog.at_level(logging.WARNING, logger="zoo"):
            for step in range(total):
                spent[0] = step / total
                assert watch(step) == Noam(300)(step)
        assert caplog.text.count("task.scheduler.warmup_steps=300 is longer than this run") == warned
        if warned:
            assert "ends near step 150" in caplog.text and "task.scheduler.warmup_fraction" in caplog.text

"""Schedules and settings checked as one: a wsd schedule in a run bounded by tokens knows its step count (its
warm-up share and cool-down follow the closed form); a schedule that needs a step count and has none is refused
when it is built; a schedule or mask setting that the run's choices would not read is refused when given on the
command line (exit 2, naming the setting and what reads it) and warned about when a config file holds it; the
documented wsd keys are overridden without a +."""

import json
import logging
import math

import pytest
import torch
from zoo_run import TINY, TINY_MODEL, make_cfg, run_cli

from zoo.errors import ConfigError
from zoo.run.cli_overrides import typos
from zoo.run.conf import CONF_DIR
from zoo.run.job import checked_config
from zoo.run.train import run
from zoo.training.optim_checks import SCHEDULER_KEYS
from zoo.training.optim_config import configure_optimizers

LR, MIN_LR = 2.0e-3, 1.0e-4  # conf/task/lm.yaml
STEP_TOKENS = 8 * 32  # TINY: data.batch_size=8 windows of data.block_size=32


def wsd_closed_form(s: int, warmup: int, start: int, end: int) -> float:
    """Hägele et al. 2024's warm-up / stable / 1-sqrt cool-down at optimizer step s (0-based): LR (s + 1) / warmup
    in the warm-up, LR until `start`, then LR - (LR - MIN_LR) sqrt((s - start) / (end - start))."""
    if s < warmup:
        return LR * (s + 1) / warmup
    if s < start:
        return LR
    return LR - (LR - MIN_LR) * math.sqrt((s - start) / (end - start))


@pytest.mark.e2e
@pytest.mark.usefixtures("one_thread")
def test_wsd_in_a_tokens_run_warms_up_over_its_share_and_cools_down_to_the_budget(tmp_path):
    """budget.kind=tokens of 12 steps' tokens (12 x 8 x 32): the run trains 12 steps; warmup_fraction 0.25 warms
    up over 3 of them (not warmup_steps=100, which never peaks), and the 1-sqrt cool-down from step 8 ends at the
    budget's step 12 (not at trainer.max_steps=-1, which raised at step 8)."""
    extra = [
        "task.sample=null",
        "task.scheduler.kind=wsd",
        "task.scheduler.decay_start=8",
        "task.scheduler.warmup_fraction=0.25",
        "budget.kind=tokens",
        f"budget.value={12 * STEP_TOKENS}",
    ]
    record = tmp_path / "record.jsonl"
    callback = ["+callbacks.record._target_=test_resume.Record", f"+callbacks.record.path={record}"]
    run(make_cfg(tmp_path, [*TINY, *extra, "logger=csv", *callback]))
    rows = [r for r in map(json.loads, record.read_text().splitlines()) if r["kind"] == "train"]
    assert [r["step"] for r in rows] == list(range(1, 13))
    for r in rows:  # a row's step is counted after the optimizer step its lr drove
        assert r["lr"] == pytest.approx(wsd_closed_form(r["step"] - 1, 3, 8, 12), rel=1e-9), r["step"]


def test_wsd_in_a_tokens_run_is_fitted_to_the_budgets_steps(tmp_path):
    """The same fit, read off the checked config: 3000 tokens at 256 a step end at the first step that reaches
    them, ceil(3000 / 256) = 12; the warm-up is round(0.25 x 12) = 3 steps and the cool-down ends there."""
    extra = ["task.scheduler.kind=wsd", "task.scheduler.decay_start=8", "task.scheduler.warmup_fraction=0.25"]
    cfg = make_cfg(tmp_path, [*TINY, *extra, "budget.kind=tokens", "budget.value=3000"])
    cfg, _, _, _ = checked_config(cfg)
    sched = cfg.task.scheduler
    assert (sched.warmup_steps, sched.warmup_fraction, sched.decay_steps) == (3, None, 12)
    late = [*TINY, "task.scheduler.kind=wsd", "task.scheduler.decay_start=12", "budget.kind=tokens"]
    with pytest.raises(ConfigError, match=r"decay_start=12 is not before the run's end \(budget.value=3000 tokens, 12"):
        checked_config(make_cfg(tmp_path, [*late, "budget.value=3000"]))
    with pytest.raises(ConfigError, match=r"decay_start=12 is not before the run's end \(trainer.max_steps=10\)"):
        checked_config(make_cfg(tmp_path, late[:-1]))


def test_wsd_without_a_step_count_is_refused_before_training(tmp_path):
    """A flops budget gives no step count (a step's FLOPs depend on the arch): a wsd that cools down, or warms up
    over a share, is refused; a constant-rate wsd (decay_start null) needs none and runs."""
    flops = [*TINY, "task.scheduler.kind=wsd", "budget.kind=flops", "budget.value=1e9"]
    with pytest.raises(ConfigError, match=r"task.scheduler.kind=wsd needs the run's step count.*budget.kind=flops"):
        checked_config(make_cfg(tmp_path, [*flops, "task.scheduler.decay_start=8"]))
    with pytest.raises(ConfigError, match=r"task.scheduler.kind=wsd needs the run's step count"):
        checked_config(make_cfg(tmp_path, [*flops, "task.scheduler.warmup_fraction=0.1"]))
    checked_config(make_cfg(tmp_path, flops))
    timed = [*TINY, "trainer.max_steps=-1", "trainer.max_time=00:00:01:00", "task.scheduler.kind=wsd"]
    with pytest.raises(ConfigError, match=r"max_time=00:00:01:00 alone bounds the run, so the wsd cool-down"):
        checked_config(make_cfg(tmp_path, [*timed, "task.scheduler.decay_start=8"]))


def test_a_schedule_without_a_step_count_is_refused_when_built():
    """configure_optimizers without a run length (max_steps -1) and without decay_steps: a wsd that cools down
    raised only at its cool-down's first step, and a cosine ran at min_lr after its warm-up; both are refused
    when built, naming the fix. A constant-rate wsd, noam, and a cosine over a budget need no length."""
    model = torch.nn.Linear(2, 2)
    for sched in ({"kind": "wsd", "warmup_steps": 2, "decay_start": 10}, {"kind": "cosine", "warmup_steps": 2}):
        with pytest.raises(ValueError, match=rf"task.scheduler.kind={sched['kind']} .*give task.scheduler.decay_steps"):
            configure_optimizers(model, {"lr": 1e-3}, sched, -1)
    with pytest.raises(ValueError, match=r"cool-down ends at step 10, not after its start at step 10"):
        configure_optimizers(model, {"lr": 1e-3}, {"kind": "wsd", "warmup_steps": 2, "decay_start": 10}, 10)
    configure_optimizers(model, {"lr": 1e-3}, {"kind": "wsd", "warmup_steps": 2, "decay_start": None}, -1)
    configure_optimizers(model, {"lr": 1e-3}, {"kind": "noam", "warmup_steps": 2}, -1)
    configure_optimizers(model, {"lr": 1e-3}, {"kind": "cosine", "warmup_steps": 2}, -1, progress=lambda: 0.0)


def test_the_table_lists_every_scheduler_key_and_mask_key():
    """READERS covers every key configure_optimizers reads (but the kind, which chooses) and every model field
    that only a mask reads."""
    from zoo.run.settings_read import MASK_KEYS, READERS

    assert {k.rsplit(".", 1)[1] for k in READERS if k.startswith("task.scheduler.")} == set(SCHEDULER_KEYS) - {"kind"}
    assert {k for k in READERS if k.startswith("model.")} == {f"model.{k}" for k in MASK_KEYS}
    assert MASK_KEYS == ("prefix_len", "window")


UNREAD = [  # (overrides, the message's start): a setting the run's choices would not read
    (
        ["task.scheduler.decay_start=500"],
        "task.scheduler.decay_start=500 would change nothing: task.scheduler.kind=cosine does not read it "
        "(task.scheduler.kind=wsd does); drop it, or set task.scheduler.kind=wsd",
    ),
    (
        ["task.scheduler.decay_shape=linear"],
        "task.scheduler.decay_shape='linear' would change nothing: task.scheduler.kind=cosine does not read it",
    ),
    (
        ["task.scheduler.kind=noam", "task.scheduler.min_lr=1e-5"],
        "task.scheduler.min_lr=1e-05 would change nothing: task.scheduler.kind=noam does not read it "
        "(task.scheduler.kind=cosine or wsd does)",
    ),
    (
        ["task.scheduler.kind=noam", "task.scheduler.warmup_steps=5", "task.scheduler.decay_steps=50"],
        "task.scheduler.decay_steps=50 would change nothing: task.scheduler.kind=noam does not read it",
    ),
    (
        ["model.window=16"],
        "model.window=16 would change nothing: model.mask=null (the arch's own mask) does not read it "
        "(model.mask=sliding does); drop it, or set model.mask=sliding",
    ),
    (
        ["model.mask=prefix", "model.window=16"],
        "model.window=16 would change nothing: model.mask=prefix does not read it",
    ),
    (
        ["model.share_embeddings=false"],
        "model.share_embeddings=False would change nothing: arch=decoder_only does not read it "
        "(arch=encoder_decoder does); drop it; the LM head's tie to the input embedding is model.tie_embeddings",
    ),
    (
        ["model.n_encoder_layers=3"],
        "model.n_encoder_layers=3 would change nothing: arch=decoder_only does not read it "
        "(arch=encoder_only or encoder_decoder does); drop it; model.n_layers sets its layers",
    ),
    (
        ["model.rope_base=500"],
        "model.rope_base=500 would change nothing: model.position=sinusoidal does not read it "
        "(model.position=rope does); drop it, or set model.position=rope",
    ),
    (
        ["model.position=rope", "model.sinusoidal_layout=split"],
        "model.sinusoidal_layout='split' would change nothing: model.position=rope does not read it",
    ),
    (["model.position_offset=2"], "model.position_offset=2 would change nothing: model.position=sinusoidal"),
    (["model.rel_buckets=16"], "model.rel_buckets=16 would change nothing: model.position=sinusoidal"),
    (
        ["model.decoder_start_id=2"],
        "model.decoder_start_id=2 would change nothing: arch=decoder_only does not read it (arch=encoder_decoder does)",
    ),
    (
        ["model.pooling=cls"],
        "model.pooling='cls' would change nothing: arch=decoder_only does not read it (arch=encoder_only does)",
    ),
    (
        ["task.scheduler.warmup_steps=5", "task.scheduler.decay_steps=50", "budget.kind=tokens", "budget.value=3000"],
        "task.scheduler.decay_steps=50 would change nothing: task.scheduler.kind=cosine does not read it under "
        "budget.kind=tokens (it decays over the budget's spent share)",
    ),
]


@pytest.mark.parametrize("overrides, message", UNREAD)
def test_a_setting_the_run_would_not_read_is_refused(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as e:
        checked_config(make_cfg(tmp_path, [*TINY, *overrides]))
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["task.scheduler.kind=wsd", "task.scheduler.decay_start=5", "task.scheduler.decay_shape=linear"],
        ["task.scheduler.kind=wsd", "task.scheduler.min_lr=1e-5"],
        ["task.scheduler.warmup_steps=5", "task.scheduler.decay_steps=50"],  # cosine bounded by steps
        ["model.mask=sliding", "model.window=16"],
        ["task.scheduler.warmup_fraction=0.2"],
        ["model.position=rope", "model.rope_base=500"],
        ["model.position=learned", "model.position_offset=2"],
        ["model.position=t5_relative", "model.rel_buckets=16", "model.rel_max_distance=64"],
        ["model.sinusoidal_layout=split"],
    ],
)
def test_a_setting_the_run_reads_passes(tmp_path, overrides):
    checked_config(make_cfg(tmp_path, [*TINY, *overrides]))


@pytest.mark.parametrize(
    "arch, overrides",
    [
        ("encoder_decoder", ["model.n_encoder_layers=3", "model.n_decoder_layers=1", "model.share_tokens=false"]),
        ("encoder_only", ["model.n_encoder_layers=3", "model.pooling=cls"]),
        ("decoder_only", ["model.n_decoder_layers=3", "model.tie_embeddings=false"]),
    ],
)
def test_an_architecture_setting_its_arch_reads_passes(tmp_path, arch, overrides):
    checked_config(make_cfg(tmp_path, [*TINY_MODEL, *overrides], arch=arch))


def test_a_presets_encoder_setting_is_not_refused_for_a_decoder_only_family(tmp_path):
    """experiment=scaling sets model.share_embeddings: true for every family of its sweep (it matters to
    encoder_decoder): from a config file, not the command line, it is not refused for decoder_only."""
    cfg = make_cfg(tmp_path, ["experiment=scaling", "scaling.cell=s1_seed1"])
    assert cfg.model.share_embeddings is True
    checked_config(cfg)


def test_a_config_files_unread_setting_is_warned_about(tmp_path, caplog):
    """conf/task/lm.yaml's min_lr (1e-4) is not read by noam: chosen on the command line, the run goes on and the
    warning names the setting; the defaults of the other keys (null, the model's window 128) say nothing."""
    with caplog.at_level(logging.WARNING, logger="zoo"):
        checked_config(make_cfg(tmp_path, [*TINY, "task.scheduler.kind=noam"]))
    unread = [r.getMessage() for r in caplog.records if "would change nothing" in r.getMessage()]
    assert unread == [
        "task.scheduler.min_lr=0.0001 would change nothing: task.scheduler.kind=noam does not read it "
        "(task.scheduler.kind=cosine or wsd does); drop it, or set task.scheduler.kind=cosine or wsd "
        "(it comes from a config file)"
    ]


@pytest.mark.e2e
def test_an_unread_setting_exits_2_with_one_line(tmp_path):
    r = run_cli(["+arch=decoder_only", "model.window=64", "trainer.max_steps=1"], cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("zoo: error: model.window=64 would change nothing")


@pytest.mark.parametrize("task", ["lm", "classification", "translation"])
def test_the_documented_wsd_keys_take_a_plain_override(tmp_path, task):
    """decay_start and decay_shape are keys of every task's scheduler (conf/task/*.yaml), so the documented
    `task.scheduler.decay_start=500` is no typo (it was refused with "did you mean decay_steps?")."""
    argv = ["+arch=decoder_only", f"task={task}", "task.scheduler.kind=wsd", "task.scheduler.decay_start=500"]
    argv.append("task.scheduler.decay_shape=linear")
    assert typos(argv, CONF_DIR) == []
    cfg = make_cfg(tmp_path, argv[1:])
    assert (cfg.task.scheduler.decay_start, cfg.task.scheduler.decay_shape) == (500, "linear")


def test_a_special_id_is_checked_against_the_datas_vocabulary_not_a_guess(tmp_path):
    """model.decoder_start_id=2 (BART's: its EOS) is inside any vocabulary zoo builds and passes the config check;
    before the data gives the vocabulary, the check knew none and refused every id but 0."""
    from zoo.run.checks.config import check_config

    for start in (0, 2, 5):
        check_config(make_cfg(tmp_path, [f"model.decoder_start_id={start}"], arch="encoder_decoder"))
    with pytest.raises(ConfigError, match=r"model.decoder_start_id=-1"):
        check_config(make_cfg(tmp_path, ["model.decoder_start_id=-1"], arch="encoder_decoder"))


@pytest.mark.parametrize("bad", [1.5, -0.1, 1.0])
def test_label_smoothing_out_of_range_is_refused_before_the_data(tmp_path, bad, monkeypatch):
    """task.label_smoothing outside [0, 1) is refused by the config check, before any data is read (on a user's
    corpus, before its tokenizer is trained): the check never opens a data file."""
    from zoo.data.files import records
    from zoo.run.checks.config import check_config

    monkeypatch.setattr(records, "read_records", lambda *a, **k: pytest.fail("the data was read"))
    cfg = make_cfg(tmp_path, [f"task.label_smoothing={bad}"], arch="encoder_decoder")
    with pytest.raises(ConfigError, match=rf"task.label_smoothing={bad} must be a number in \[0, 1\)"):
        check_config(cfg)
    check_config(make_cfg(tmp_path, ["task.label_smoothing=0.2"], arch="encoder_decoder"))


def test_a_task_key_its_task_does_not_take_is_refused_before_the_data(tmp_path, monkeypatch):
    """+task.label_smoothing on the lm task (LanguageModeling takes none) is refused by the config check, naming
    the key and the task's settings; before, it was a TypeError when the task was built, after the data."""
    from zoo.data.files import records
    from zoo.run.checks.config import check_config

    monkeypatch.setattr(records, "read_records", lambda *a, **k: pytest.fail("the data was read"))
    with pytest.raises(ConfigError, match=r"task.label_smoothing is not a setting of this task \(LanguageModeling\)"):
        check_config(make_cfg(tmp_path, ["+task.label_smoothing=0.1"], arch="decoder_only"))
    check_config(make_cfg(tmp_path, ["task.label_smoothing=0.1"], arch="encoder_decoder"))

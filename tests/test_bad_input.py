"""Bad configurations and inputs raise ValueError naming the key and the value; bad command lines of the main
job exit with 2 and a message naming the problem and the fix, before any data work."""

import json
import math

import pytest
import torch
from zoo_run import TINY, make_cfg, run_cli

from zoo.errors import ConfigError
from zoo.model import DecoderOnly, EncoderDecoder, EncoderOnly, ModelConfig, build_model
from zoo.model.blocks.feedforward import FeedForward
from zoo.model.blocks.norm import make_norm
from zoo.model.decoding.generate import sample_next
from zoo.model.init import init_weights
from zoo.run.checks.config import check_config
from zoo.run.cli_overrides import typos
from zoo.run.conf import CONF_DIR
from zoo.run.train import run
from zoo.training.optim_config import configure_optimizers

SMALL = dict(vocab_size=50, d_model=16, n_heads=4, d_ff=32, n_layers=2, dropout=0.0, max_len=16)


def cfg(**kw):
    return ModelConfig(**{**SMALL, **kw})


def test_valid_small_config():
    c = cfg()
    assert c.head_dim == 4 and c.kv_heads == 4


def test_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match=r"model\.d_model=30 .*model\.n_heads=4"):
        cfg(d_model=30)


def test_n_heads_not_divisible_by_n_kv_heads():
    with pytest.raises(ValueError, match=r"model\.n_heads=4 .*model\.n_kv_heads=3"):
        cfg(n_kv_heads=3)


@pytest.mark.parametrize(
    "key,value",
    [
        ("activation", "tanh"),
        ("norm", "batchnorm"),
        ("position", "t5"),
        ("mask", "diagonal"),
        ("init", "kaiming"),
        ("pooling", "max"),
        ("compile_scope", "everything"),
    ],
)
def test_unknown_choice(key, value):
    with pytest.raises(ValueError, match=rf"model\.{key}='{value}' is unknown"):
        cfg(**{key: value})


def test_rope_odd_head_dim():
    with pytest.raises(ValueError, match=r"model\.position='rope'.*12/4=3"):
        cfg(d_model=12, n_heads=4, position="rope")
    cfg(d_model=12, n_heads=4, position="sinusoidal")  # odd head_dim is fine without RoPE


@pytest.mark.parametrize(
    "kw,key",
    [
        (dict(dropout=1.0), r"dropout=1\.0 must be in \[0, 1\): a probability of dropping, below 1$"),
        (dict(attn_dropout=-0.1), r"attn_dropout=-0\.1 must be in \[0, 1\): a probability of dropping, below 1$"),
        (dict(dropout="abc"), r"dropout='abc' must be in \[0, 1\): a probability of dropping, below 1$"),
        (dict(mask="sliding", window=0), "window"),
        (dict(prefix_len=-1), "prefix_len"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(n_layers=-1), "n_layers"),
        (dict(n_layers=0), r"n_layers=0 must be >= 1: a stack without layers"),
        (dict(n_encoder_layers=0), r"n_encoder_layers=0 must be >= 1"),
        (dict(n_decoder_layers=0), r"n_decoder_layers=0 must be >= 1"),
        (dict(n_kv_heads=0), r"n_kv_heads=0 must be >= 1 \(or null: n_heads\)"),
        (dict(position="rope", rope_base=-1.0), r"rope_base=-1\.0 must be a positive, finite number"),
        (dict(norm_eps=-1.0), r"norm_eps=-1\.0 must be a positive, finite number"),
        (dict(norm_eps=float("nan")), r"norm_eps=nan must be a positive, finite number"),
        (dict(src_vocab_size=0), "src_vocab_size=0"),
        (dict(src_vocab_size=-5), "src_vocab_size=-5"),
        (dict(share_embeddings=True, src_vocab_size=40), "share_embeddings.*src_vocab_size=40"),
        (dict(pad_id=2), "pad_id=2 and model.eos_id=2 are the same id"),
        (dict(bos_id=2), "bos_id=2 and model.eos_id=2 are the same id"),
        (dict(bos_id=0), "pad_id=0 and model.bos_id=0 are the same id"),
    ],
)
def test_other_bad_values(kw, key):
    with pytest.raises(ValueError, match=rf"model\.{key}"):
        cfg(**kw)


def test_from_dict_unknown_key():
    with pytest.raises(ValueError, match="n_head"):
        ModelConfig.from_dict({**SMALL, "n_head": 4})
    assert ModelConfig.from_dict(SMALL).d_model == 16


def test_validate_after_mutation():
    c = cfg()
    c.n_heads = 5
    with pytest.raises(ValueError, match=r"model\.n_heads=5"):
        DecoderOnly(c)


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi"])
def test_sequence_longer_than_max_len(position):
    model = DecoderOnly(cfg(position=position)).eval()
    model(torch.full((1, 16), 5))  # exactly max_len is fine
    with pytest.raises(ValueError, match=r"model\.max_len=16"):
        model(torch.full((1, 17), 5))


def test_learned_positions_explicit_position_beyond_max_len():
    model = EncoderOnly(cfg(position="learned")).eval()
    with pytest.raises(ValueError, match=r"model\.max_len=16"):
        model(torch.full((1, 3), 5), positions=torch.tensor([[0, 1, 16]]))


@pytest.mark.parametrize("bad", [50, 1000, -1])
@pytest.mark.parametrize("arch", ["encoder_only", "decoder_only"])
def test_token_outside_vocabulary(arch, bad):
    model = build_model(arch, cfg())
    idx = torch.tensor([[3, 4, bad, 5]])
    with pytest.raises(ValueError, match=rf"token id {bad} .*model\.vocab_size"):
        model(idx)


def test_token_outside_vocabulary_encoder_decoder():
    model = EncoderDecoder(cfg(src_vocab_size=30))
    ok = torch.tensor([[3, 4, 5]])
    model(torch.tensor([[29, 3]]), ok)  # the source vocabulary is 30
    with pytest.raises(ValueError, match=r"\[0, 30\).*model\.vocab_size"):
        model(torch.tensor([[30, 3]]), ok)
    with pytest.raises(ValueError, match=r"token id 50 .*\[0, 50\)"):
        model(ok, torch.tensor([[3, 50]]))


def test_key_padding_mask_wrong_shape_and_dtype():
    model = DecoderOnly(cfg())
    idx = torch.full((2, 5), 5)
    with pytest.raises(ValueError, match="key_padding_mask"):
        model(idx, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_padding_mask must be bool"):
        model(idx, key_padding_mask=torch.zeros(2, 5, dtype=torch.long))


def test_generate_beyond_max_len():
    model = DecoderOnly(cfg())
    with pytest.raises(ValueError, match=r"model\.max_len=16"):
        model.generate(torch.full((1, 10), 5), max_new_tokens=7)
    with pytest.raises(ValueError, match=r"model\.max_len=16"):
        EncoderDecoder(cfg()).generate(torch.full((1, 4), 5), max_new_tokens=16)


@pytest.mark.parametrize("kw", [dict(temperature=-1.0), dict(top_k=0), dict(top_p=0.0), dict(top_p=1.5)])
def test_sample_next_bad_arguments(kw):
    with pytest.raises(ValueError, match="temperature"):
        sample_next(torch.zeros(1, 5), **kw)


def test_cross_attention_needs_memory():
    model = EncoderDecoder(cfg())
    with pytest.raises(ValueError, match="memory"):
        model.decoder(torch.zeros(1, 3, 16))


def test_block_constructors_reject_unknown_names():
    with pytest.raises(ValueError, match="activation='tanh'"):
        FeedForward(8, 16, "tanh")
    with pytest.raises(ValueError, match="norm='batchnorm'"):
        make_norm("batchnorm", 8)
    with pytest.raises(ValueError, match="init='kaiming'"):
        init_weights(torch.nn.Linear(2, 2), "kaiming")
    with pytest.raises(ValueError, match="arch='gpt'"):
        build_model("gpt", cfg())


@pytest.mark.parametrize("key,value", [("compile", "no"), ("bias", 1), ("final_norm", "off")])
def test_switches_must_be_booleans(key, value):
    """A yes/no key given anything but true / false (Hydra reads `model.compile=no` as the string 'no',
    which Python would take as true) is refused by name."""
    with pytest.raises(ValueError, match=rf"model\.{key}={value!r} must be true or false"):
        cfg(**{key: value})


# ---- the main job's command line and config --------------------------------------------------------------
TYPO = (
    "zoo: error: data.text_colum is not a key of data (text_classification); did you mean data.text_column? "
    "(+data.text_colum=... adds a new key)"
)


@pytest.mark.e2e
def test_override_typo_exits_2_with_the_key_it_meant(tmp_path):
    """A typo in an override of an existing group's key: zoo's message (not Hydra's advice to add it with +)."""
    r = run_cli(["+arch=encoder_only", "data=text_classification", "data.text_colum=x"], cwd=tmp_path)
    assert r.returncode == 2 and TYPO in r.stderr and "To append" not in r.stderr, r.stderr
    # every typo of the command line at once, hydra.* keys too
    r = run_cli(["+arch=encoder_only", "model.d_modle=64", "hydra.run.dirr=x"], cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert (
        "zoo: error: model.d_modle is not a key of model (tiny); did you mean model.d_model? "
        "(+model.d_modle=... adds a new key)"
    ) in r.stderr
    assert "zoo: error: hydra.run.dirr is not a key of hydra.run; did you mean hydra.run.dir?" in r.stderr
    assert not (tmp_path / "outputs").exists()  # before Hydra made a run dir


@pytest.mark.slow
@pytest.mark.e2e
def test_override_typo_in_a_multirun_exits_2_before_any_job(tmp_path):
    r = run_cli(
        [
            "-m",
            "+arch=encoder_only,decoder_only",
            "data=text_classification",
            "model.d_model=32,48",
            "data.text_colum=x",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 2 and TYPO in r.stderr, r.stderr
    r = run_cli(
        ["-m", "+arch=decoder_only", "model.d_modle=32,48", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path
    )  # the typo is in the swept key: the first job's config names it
    assert r.returncode == 2 and "zoo: error: model.d_modle is not a key of model (tiny)" in r.stderr, r.stderr
    assert not (tmp_path / "sweep").exists()


@pytest.mark.slow  # an end-to-end run; `pytest -m slow` runs it
@pytest.mark.e2e
def test_override_check_leaves_help_cfg_and_good_runs_alone(tmp_path):
    r = run_cli(["--help"], cwd=tmp_path)
    assert r.returncode == 0 and "Configuration groups" in r.stdout, r.stderr
    r = run_cli(["--cfg", "job", "+arch=decoder_only", "model.d_model=48", "hydra.job.chdir=false"], cwd=tmp_path)
    assert r.returncode == 0 and "d_model: 48" in r.stdout, r.stderr
    r = run_cli(
        ["+arch=decoder_only", *TINY, "trainer.max_steps=2", "logger=csv", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
    )
    assert r.returncode == 0 and (tmp_path / "run" / "results.json").is_file(), r.stderr[-2000:]


def test_override_check_is_silent_on_good_command_lines():
    """A good command line (a sweep, hydra.* keys, an error Hydra reports itself) gives no message."""
    for argv in (
        ["+arch=decoder_only", "model.d_model=48", "hydra.run.dir=x"],
        ["-m", "+arch=encoder_only,decoder_only", "model.d_model=32,48", "hydra.sweep.dir=x"],
        ["-m", "experiment=compare", "compare.seeds=1"],
        ["+arch=decoder_only", "model.d_model=32,48"],
    ):
        assert typos(argv, CONF_DIR) == [], argv
    assert typos(["data.block_size=32"], CONF_DIR) == [  # no +arch: no task, so no data yet
        "data.block_size sets a key of data, but no data=... option is chosen, so the config has no data; add "
        "data=<an option of conf/data/> (or +arch=..., whose task picks its data)"
    ]


@pytest.mark.parametrize(
    "override,message",
    [
        (
            "+task.optimizer.lrr=1e-3",
            r"task\.optimizer\.lrr is not a key of task\.optimizer, and nothing would read it; "
            r"did you mean task\.optimizer\.lr\? its keys are: lr, betas, weight_decay, eps",
        ),
        (
            "+task.scheduler.warmup=10",
            r"task\.scheduler\.warmup is not a key of task\.scheduler.*did you mean "
            r"task\.scheduler\.warmup_steps\? its keys are: kind, warmup_steps, decay_steps, min_lr",
        ),
    ],
)
def test_unknown_optimizer_or_scheduler_key(tmp_path, override, message):
    """Refused by check_config (before any data work) and by configure_optimizers itself."""
    cfg = make_cfg(tmp_path, [override])
    with pytest.raises(ConfigError, match=message):
        check_config(cfg)
    task = cfg.task
    with pytest.raises(ValueError, match=message):
        configure_optimizers(torch.nn.Linear(2, 2), dict(task.optimizer), dict(task.scheduler), 10)


def test_encoder_only_translation_with_two_vocabularies_is_refused_before_data(tmp_path):
    cfg = make_cfg(tmp_path, ["task=translation", "data.joint_vocab=false"], arch="encoder_only")
    with pytest.raises(
        ConfigError,
        match="encoder_only translation reads source and target as one sequence, so it "
        "needs one vocabulary: set data.joint_vocab=true",
    ):
        check_config(cfg)
    check_config(make_cfg(tmp_path, ["task=translation", "data.joint_vocab=false"], arch="encoder_decoder"))


@pytest.mark.e2e
def test_num_classes_other_than_the_data_is_refused(tmp_path):
    """model.num_classes=5 on SST-2 (2 classes) is refused, naming both counts; 0 (the default) is the data's."""
    cfg = make_cfg(
        tmp_path, ["model.num_classes=5", "data.limit=64", "data.tokenizer=char", "logger=csv"], arch="encoder_only"
    )
    with pytest.raises(
        ConfigError,
        match=r"model\.num_classes=5, but the data \(.*\) has 2 classes \(0, 1\); drop "
        r"the override",
    ):
        run(cfg)
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize(
    "seed",
    [
        "abc",
        pytest.param("-1", marks=pytest.mark.slow),
        pytest.param("1.5", marks=pytest.mark.slow),
        pytest.param("4294967296", marks=pytest.mark.slow),  # 2**32: numpy's seeds end below it
    ],
)
@pytest.mark.e2e
def test_a_bad_seed_exits_2(tmp_path, seed):
    proc = run_cli(["+arch=decoder_only", f"seed={seed}", "trainer.max_steps=1"], cwd=tmp_path)
    assert proc.returncode == 2 and "must be a non-negative integer" in proc.stderr, proc.stderr[-1000:]


@pytest.mark.parametrize(
    "seed, refused",
    [("-1", True), ("1.5", True), ("4294967296", True), ("true", True), ("0", False), ("4294967295", False)],
)
def test_seed_range_is_checked_in_process(tmp_path, capsys, seed, refused):
    """The check behind test_a_bad_seed_exits_2, on the composed config (no process started): a negative, a
    fractional, a boolean seed and 2**32 exit with 2 and the message; 0 and 2**32 - 1 (numpy's last) pass."""
    from zoo.run.conf import exit_on_bad_arch_or_seed

    cfg = make_cfg(tmp_path, [f"seed={seed}"])
    if not refused:
        exit_on_bad_arch_or_seed(cfg)
        return
    with pytest.raises(SystemExit) as exit_:
        exit_on_bad_arch_or_seed(cfg)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo: error: seed=") and "must be a non-negative integer below 2**32" in err


@pytest.mark.parametrize("n", ["0", pytest.param("two", marks=pytest.mark.slow)])
@pytest.mark.e2e
def test_bad_compare_seeds_exits_2_before_any_job(tmp_path, n):
    """compare.seeds=0 would sweep no seed at all: refused with a message, and no job starts."""
    proc = run_cli(
        ["-m", "experiment=compare", f"compare.seeds={n}", f"hydra.sweep.dir={tmp_path}/sweep"], cwd=tmp_path
    )
    assert proc.returncode == 2 and "must be a positive whole number" in proc.stderr, proc.stderr[-1000:]
    assert "Traceback" not in proc.stderr and "#0 :" not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["+arch=decoder_only", "data=tiny_shakspeare"],
            "data=tiny_shakspeare is not an option of data; did you mean data=tiny_shakespeare? its options are: "
            "bible_en_es, multi30k, parallel_text, shakespeare_plays, sst2, text_classification, text_corpus, "
            "tiny_shakespeare",
        ),
        (
            ["+arch=decoder_onyl"],
            "+arch=decoder_onyl is not an option of arch; did you mean +arch=decoder_only? its options are: "
            "decoder_only, encoder_decoder, encoder_only, prefix_lm",
        ),
        (
            ["+arch=decoder_only", "data=no_such_data"],  # nothing near: the options alone
            "data=no_such_data is not an option of data; its options are: "
            "bible_en_es, multi30k, parallel_text, shakespeare_plays, sst2, text_classification, text_corpus, "
            "tiny_shakespeare",
        ),
    ],
)
def test_a_group_option_typo_names_the_options(argv, message):
    """A group option with no config file is named with the group's options and the nearest one (Hydra's own
    error exits 1 with its search path), and where a config of one's own goes; a key typo on the same line is
    still reported."""
    option = argv[-1].lstrip("+").replace("=", "/")
    message += f". A config of your own is read from DIR/{option}.yaml with hydra.searchpath=[file://DIR]"
    assert typos(argv, CONF_DIR) == [message]
    assert typos([*argv, "model.d_modle=3"], CONF_DIR)[0] == message
    assert "model.d_modle is not a key of model" in typos([*argv, "model.d_modle=3"], CONF_DIR)[1]


@pytest.mark.parametrize(
    "steps, what", [(0, "would train nothing"), (-5, "would train nothing"), ("two", "is not a whole number")]
)
def test_max_steps_that_train_nothing_are_refused(tmp_path, steps, what):
    """trainer.max_steps=0 would finish at once with an empty results.json marked ok, and a negative one other
    than -1 fails inside Lightning: both are a ConfigError (exit 2) before any data work, as is a word; -1 stays
    allowed."""
    cfg = make_cfg(tmp_path, [f"trainer.max_steps={steps}"])
    with pytest.raises(ConfigError, match=rf"trainer\.max_steps=.* {what}: give a positive number"):
        check_config(cfg)
    check_config(make_cfg(tmp_path, ["trainer.max_steps=-1", "trainer.max_epochs=1"]))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["trainer.gradient_clip_val=-1"], r"trainer\.gradient_clip_val=-1 must be a number >= 0"),
        (["trainer.gradient_clip_val=nan"], r"trainer\.gradient_clip_val=nan must be a number >= 0"),
        (["trainer.gradient_clip_val=abc"], r"trainer\.gradient_clip_val='abc' must be a number >= 0"),
        (["trainer.max_steps=-1", "trainer.max_epochs=-1"], r"\(no max_time, no budget\) leave the run without an end"),
        (
            ["trainer.max_steps=-1", "trainer.max_time=00:00:01:00"],
            r"max_time=00:00:01:00 alone bounds the run, so the cosine .* budget\.kind=time",
        ),
        (["task.optimizer.lr=-0.1"], r"task\.optimizer\.lr=-0\.1 must be a positive number"),
        (["task.optimizer.lr=nan"], r"task\.optimizer\.lr=nan must be a positive number"),
        (["task.optimizer.betas=[2,0.9]"], r"task\.optimizer\.betas=\[2, 0\.9\] must be two numbers in \[0, 1\)"),
        (["task.optimizer.betas=[0.9]"], r"task\.optimizer\.betas=\[0\.9\] must be two numbers"),
        (["task.optimizer.weight_decay=-1"], r"task\.optimizer\.weight_decay=-1 must be a number >= 0"),
        (["task.optimizer.eps=0"], r"task\.optimizer\.eps=0 must be a number > 0"),
        (["trainer.max_steps=-1", "trainer.max_epochs=0"], r"trainer\.max_epochs=0 must be a positive whole number"),
        (["task.scheduler.decay_steps=-5"], r"task\.scheduler\.decay_steps=-5 must be a whole number of optimizer"),
        (
            ["task.scheduler.warmup_steps=10", "task.scheduler.decay_steps=5"],
            r"decay_steps=5 ends the cosine before its warm-up \(task\.scheduler\.warmup_steps=10\) does",
        ),
        (["task.sample.temperature=-1"], r"task\.sample\.temperature=-1 must be a number >= 0"),
        (["task.scheduler.min_lr=-1"], r"task\.scheduler\.min_lr=-1 must be a number in \[0, task\.optimizer\.lr="),
        (["task.scheduler.min_lr=1.0"], r"task\.scheduler\.min_lr=1\.0 must be a number in \[0, "),
        (["trainer.accumulate_grad_batches=0"], r"trainer\.accumulate_grad_batches=0 must be a whole number >= 1"),
        (["trainer.val_check_interval=0"], r"trainer\.val_check_interval=0 must be > 0"),
        (["task.sample.top_k=0"], r"task\.sample\.top_k=0 must be a whole number >= 1"),
        (["data=text_corpus"], r"data\.file is not set \(\?\?\? in the config\): give data\.file=\.\.\."),
    ],
)
def test_a_clip_an_optimizer_value_or_an_endless_run_is_refused_before_the_data(tmp_path, overrides, message):
    """A negative, NaN or non-numeric gradient_clip_val; an AdamW value torch would refuse inside the first
    step (lr <= 0 or NaN, betas outside [0, 1), weight_decay < 0, eps 0); max_steps=-1 with no epochs or budget
    to end the run (whose schedule length would be infinite), or with only max_time and a cosine schedule,
    which then has no length: ConfigErrors from check_config, before any data work. The edges pass."""
    with pytest.raises(ConfigError, match=message):
        check_config(make_cfg(tmp_path, overrides))
    check_config(make_cfg(tmp_path, ["trainer.gradient_clip_val=0", "task.optimizer.betas=[0,0.99]"]))
    check_config(
        make_cfg(tmp_path, ["task.optimizer.weight_decay=0", "task.optimizer.lr=1e-30", "task.scheduler.min_lr=0"])
    )
    check_config(make_cfg(tmp_path, ["task.scheduler.warmup_steps=10", "task.scheduler.decay_steps=10"]))
    check_config(make_cfg(tmp_path, ["trainer.max_epochs=2", "task.sample.temperature=0", "task.sample.top_k=null"]))
    time_only = ["trainer.max_steps=-1", "trainer.max_time=00:00:01:00"]
    for schedule in ("task.scheduler.kind=noam", "task.scheduler.decay_steps=100"):
        check_config(make_cfg(tmp_path, [*time_only, schedule]))


@pytest.mark.e2e
def test_a_run_bounded_by_max_time_alone_trains_with_a_noam_schedule(tmp_path):
    """trainer.max_steps=-1 with trainer.max_time (experiment=translation_multi30k's shape) trains: Lightning's
    step estimate is infinite there, and noam's schedule needs none (configure_optimizers used to take int() of
    it). The run stops on time, having stepped."""
    over = [o for o in TINY if not o.startswith("trainer.max_steps")]
    over += ["trainer.max_steps=-1", "trainer.max_time=00:00:00:03", "task.scheduler.kind=noam", "logger=csv"]
    run(make_cfg(tmp_path, over))
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] > 0 and math.isfinite(results["final"]["train/loss"])


def test_a_precision_lightning_does_not_run_is_refused_before_the_data(tmp_path):
    """trainer.precision=banana: a ConfigError naming the values Lightning takes, from check_config (before any
    data work), not Lightning's error after the data has loaded; its own spellings, 32 and bf16-mixed, pass."""
    with pytest.raises(ConfigError, match=r"trainer\.precision='banana' is not a precision .* pick one of 32-true, "):
        check_config(make_cfg(tmp_path, ["trainer.precision=banana"]))
    for ok in ("32", "bf16-mixed", "16-mixed"):
        check_config(make_cfg(tmp_path, [f"trainer.precision={ok}"]))


def test_the_precisions_check_config_takes_are_lightnings():
    """PRECISIONS is the set of values in Lightning's own type of Trainer(precision=...) (a private Literal,
    flattened here), so a Lightning upgrade that adds or drops one fails this test, not a user's run."""
    import typing

    from lightning.fabric.connector import _PRECISION_INPUT

    from zoo.run.checks.trainer import PRECISIONS

    def values(t):
        args = typing.get_args(t)
        return {str(v) for a in args for v in (values(a) if typing.get_args(a) else [a])}

    assert set(PRECISIONS) == values(_PRECISION_INPUT) and len(PRECISIONS) == len(set(PRECISIONS))


def test_a_bad_budget_is_refused_before_any_job():
    """compare.budget=bogus: zoo's BudgetError message from the pre-launch check, for one run and a multirun's
    first job alike, not a resolver traceback after the sweep has launched its jobs."""
    want = "compare.budget='bogus' is unknown; allowed: steps, tokens, flops, time"
    one = ["experiment=compare", "+arch=decoder_only", "+benchmark=lm", "compare.budget=bogus"]
    assert typos(one, CONF_DIR) == [want]
    assert typos(["-m", "experiment=compare", "compare.budget=bogus"], CONF_DIR) == [want]
    assert typos(["-m", "experiment=compare", "compare.budget=flops"], CONF_DIR) == []
    missing = typos([*one[:-1], "compare.budget=tokens", "compare.budgets.lm.tokens=null"], CONF_DIR)
    assert len(missing) == 1 and "this cell has no tokens budget" in missing[0]


def _resolver_error(inner: Exception, wrapper=None):
    """An InterpolationResolutionError (or `wrapper`, e.g. Hydra's InstantiationException) raised, as OmegaConf
    and Hydra do, while handling the error `inner` of a resolver (or a constructor)."""
    from omegaconf.errors import InterpolationResolutionError

    wrapper = wrapper or InterpolationResolutionError
    try:
        try:
            raise inner
        except type(inner):
            raise wrapper(f"{type(inner).__name__} raised while resolving") from None
    except wrapper as e:
        return e


@pytest.mark.parametrize("kind", ["budget", "other_resolver_value_error"], ids=["zoo_budget", "another_resolver"])
def test_a_wrapped_resolver_error_exits_2(capsys, kind):
    """A BudgetError (or any resolver's ValueError: a resolver sees only the user's config) that OmegaConf
    wraps while resolving prints the resolver's own message and exits 2, with no traceback."""
    from zoo.run.budget import BudgetError
    from zoo.run.train import handle_error

    inner = BudgetError("compare.budget='x' is unknown") if kind == "budget" else ValueError("zoo_seeds: n=0 < 1")
    with pytest.raises(SystemExit) as exit_:
        handle_error(_resolver_error(inner))
    assert exit_.value.code == 2 and f"zoo: error: {inner}" in capsys.readouterr().err


def test_a_wrapped_resolver_bug_is_reraised(capsys):
    """A resolver's error that is not a ValueError (a bug, not bad input) is re-raised with its traceback."""
    from omegaconf.errors import InterpolationResolutionError

    from zoo.run.train import handle_error

    with pytest.raises(InterpolationResolutionError):
        handle_error(_resolver_error(KeyError("internal")))
    assert "zoo: error" not in capsys.readouterr().err


def test_a_cell_of_an_undefined_size_names_the_sizes(capsys, tmp_path):
    """scaling.cell=s9_seed1 resolves ${scaling.sizes.${zoo_cell_size:...}}: OmegaConf wraps the resolver's
    ConfigError in two InterpolationResolutionErrors; the user sees the resolver's message alone, exit 2."""
    from omegaconf import OmegaConf

    from zoo.run.job import compose_job
    from zoo.run.train import handle_error

    cfg = compose_job(
        ["+arch=decoder_only", "experiment=scaling", "+benchmark=scaling", "scaling.cell=s9_seed1"], str(tmp_path)
    )
    with pytest.raises(Exception) as raised:
        OmegaConf.resolve(cfg)
    with pytest.raises(SystemExit) as exit_:
        handle_error(raised.value)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith("zoo: error: scaling.cell='s9_seed1' names size 's9'") and "pick one of s1, s2, s3, s4" in err
    assert "raised while resolving" not in err


def test_a_trainer_misconfiguration_exits_2_naming_the_trainer_config(capsys):
    """trainer=gpu on a machine without one: Hydra wraps Lightning's MisconfigurationException from the
    Trainer's constructor; zoo prints it with the trainer options that run here and exits 2."""
    from hydra.errors import InstantiationException
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from zoo.run.train import handle_error

    wrapped = _resolver_error(MisconfigurationException("No supported gpu backend found!"), InstantiationException)
    with pytest.raises(SystemExit) as exit_:
        handle_error(wrapped)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith("zoo: error: the trainer config (trainer=..., trainer.*): No supported gpu backend found!")
    assert "trainer=cpu runs on any machine" in err


@pytest.mark.parametrize(
    "override, message",
    [
        ("task.beam_size=0", r"task\.beam_size=0 must be a whole number >= 1"),
        ("task.length_penalty=nan", r"task\.length_penalty=nan must be a finite number"),
    ],
)
def test_translation_decoding_out_of_range_is_refused_before_the_data(tmp_path, override, message):
    """A beam of 0 trained a whole run and decoded nothing at test time; a NaN length penalty ranks beams by
    NaN. Both are ConfigErrors from check_config; the default (beam 4, alpha 0.6) passes."""
    with pytest.raises(ConfigError, match=message):
        check_config(make_cfg(tmp_path, [override], arch="encoder_decoder"))
    check_config(make_cfg(tmp_path, ["task.beam_size=1"], arch="encoder_decoder"))


@pytest.mark.parametrize("preset", ["experiment=compare", "experiment=scaling"])
def test_a_sweep_preset_without_m_says_to_add_m(preset, tmp_path):
    """A sweep preset run without -m (its +arch and +benchmark unset): one line naming the keys and -m, exit 2,
    no traceback."""
    r = run_cli([preset], cwd=tmp_path, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    name = preset.split("=")[1]
    assert f"zoo: error: experiment={name} sweeps +arch, +benchmark (hydra.sweeper.params)" in r.stderr
    assert f"python -m zoo -m experiment={name}" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_messages_list_names_the_first_k_and_counts_the_rest():
    from zoo.errors import listed

    assert listed(["a", "b", "c", "d"], 2) == "a, b and 2 more"
    assert listed(["a", "b"], 2) == "a, b" and listed([], 3) == ""
    assert listed(["x: 1", "y: 2", "z: 3", "w: 4"], 3, sep="; ") == "x: 1; y: 2; z: 3 and 1 more"

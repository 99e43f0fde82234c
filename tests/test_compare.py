"""experiment=compare: the sweep covers the 4 arch x 3 task cells once per seed, each cell composes its own
task and data, and the architectures of a task have parameter counts within 10% of each other (built with the
real data's vocabularies, as a run builds them)."""

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from zoo_run import make_cfg

from zoo.model.cost import param_count
from zoo.run.checks.config import check_config
from zoo.run.conf import CONF_DIR
from zoo.run.model_config import FROM_DATA, model_dict

ARCHS = ("encoder_only", "decoder_only", "encoder_decoder", "prefix_lm")  # +arch choices; prefix_lm: decoder_only
CELLS = {
    "classification": ("sst2", "zoo.tasks.classification.Classification"),
    "lm": ("tiny_shakespeare", "zoo.tasks.lm.LanguageModeling"),
    "translation": ("multi30k", "zoo.tasks.translation.Translation"),
}


@pytest.mark.parametrize("seeds, expected", [(None, "1,2,3"), (1, "1"), (5, "1,2,3,4,5")])
def test_sweep_lists_every_cell_and_seed(seeds, expected):
    extra = [] if seeds is None else [f"compare.seeds={seeds}"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["experiment=compare", *extra], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    assert list(params) == [
        "+arch",
        "+benchmark",
        "seed",
    ]  # arch first: the cell's task / data / steps win over the arch's
    assert sorted(params["+arch"].split(",")) == sorted(ARCHS)
    assert sorted(params["+benchmark"].split(",")) == sorted(CELLS)
    assert params["seed"] == expected
    assert cfg.experiment_name == "compare"


@pytest.fixture(scope="module")
def model_info(tmp_path_factory):
    """model_info() of each cell's real datamodule (BPE vocabularies trained as in a run), keyed by cell."""
    infos = {}
    for cell in CELLS:
        cfg = make_cfg(tmp_path_factory.mktemp(cell), ["experiment=compare", f"+benchmark={cell}"], arch="decoder_only")
        dm = instantiate(cfg.data)
        dm.prepare_data()
        dm.setup()
        infos[cell] = dm.model_info()
    return infos


@pytest.mark.e2e
@pytest.mark.parametrize("cell", list(CELLS))
def test_parameters_match_within_ten_percent(cell, model_info, tmp_path):
    """Each cell composes its task and data whatever the arch's natural ones are; the built models of a
    task's three architectures have parameter counts within 10% of the largest."""
    data, task_target = CELLS[cell]
    info = model_info[cell]
    params = {}
    for arch in ARCHS:
        cfg = make_cfg(tmp_path / arch, ["experiment=compare", f"+benchmark={cell}"], arch=arch)
        assert cfg.task._target_ == task_target and cfg.data._target_.endswith(
            {"sst2": "SST2", "tiny_shakespeare": "TinyShakespeare", "multi30k": "Multi30k"}[data]
        )
        assert cfg.experiment_name == "compare"
        check_config(cfg)  # every cell is a valid run (the task trains this arch)
        model = model_dict(cfg)
        model.update({k: info[k] for k in FROM_DATA if k in info})
        task = instantiate(cfg.task, arch=cfg.arch, model=model, tokenizer=info["tokenizer"], _convert_="all")
        params[arch] = param_count(task.model)
    spread = (max(params.values()) - min(params.values())) / max(params.values())
    assert spread <= 0.10, f"{cell}: parameter counts {params} differ by {spread:.1%} (> 10%)"


@pytest.mark.parametrize(
    "experiment, steps",
    [
        ("compare", {"classification": 1000, "lm": 400, "translation": 900}),
        ("compare_gpu", {"classification": 6000, "lm": 5000, "translation": 20000}),
    ],
)
@pytest.mark.e2e
def test_cells_take_their_budgets_from_the_experiment(experiment, steps):
    """A cell's steps and validation interval come from its experiment's tables (compare.budgets, val_every),
    whatever the arch's natural budget (encoder_only: two epochs); compare.budget picks the kind."""
    for cell, n in steps.items():
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose("config", overrides=[f"experiment={experiment}", "+arch=encoder_only", f"+benchmark={cell}"])
        assert cfg.trainer.max_steps == n and cfg.trainer.max_epochs == -1
        assert cfg.trainer.val_check_interval == cfg.compare.val_every[cell] < n
        kind = cfg.compare.budget  # compare: time (3 seeds in 2 hours on a CPU); compare_gpu: steps
        assert kind == {"compare": "time", "compare_gpu": "steps"}[experiment]
        want = None if kind == "steps" else cfg.compare.budgets[cell][kind]  # steps: trainer.max_steps binds
        assert (cfg.budget.kind, cfg.budget.value) == (kind, want)
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose(
                "config",
                overrides=[
                    f"experiment={experiment}",
                    "+arch=encoder_only",
                    f"+benchmark={cell}",
                    "compare.budget=steps",
                ],
            )
        assert cfg.budget.kind == "steps" and cfg.budget.value is None  # steps: trainer.max_steps binds
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose(
                "config",
                overrides=[
                    f"experiment={experiment}",
                    "+arch=encoder_only",
                    f"+benchmark={cell}",
                    "compare.budget=time",
                    f"compare.budgets.{cell}.time=90",
                ],
            )
        assert (cfg.budget.kind, cfg.budget.value) == ("time", 90)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={experiment}", "+arch=encoder_only", "+benchmark=lm"])
    assert cfg.model.d_model == (512 if experiment == "compare_gpu" else 128)


BLOCK_OPTIONS = (
    "norm_first",
    "norm",
    "activation",
    "position",
    "init",
    "dropout",
    "bias",
    "final_norm",
    "scale_embeddings",
    "tie_embeddings",
)


@pytest.mark.e2e
@pytest.mark.parametrize("experiment", ["compare", "compare_gpu"])
def test_every_cell_uses_the_same_block_options(experiment):
    """Within each task, every architecture of the comparison has the same block options (a faster recipe for
    one arch must not turn the comparison into pre-LN + RoPE against post-LN + sinusoidal)."""
    for cell in CELLS:
        options = {}
        for arch in ARCHS:
            with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
                cfg = compose("config", overrides=[f"experiment={experiment}", f"+arch={arch}", f"+benchmark={cell}"])
            options[arch] = {k: cfg.model.get(k) for k in BLOCK_OPTIONS}
        first = options[ARCHS[0]]
        assert all(o == first for o in options.values()), f"{experiment} {cell}: {options}"


def paper_block_options() -> dict:
    """The block options of model/tiny.yaml: the paper's design, the default of every model preset."""
    from omegaconf import OmegaConf

    tiny = OmegaConf.load(f"{CONF_DIR}/model/tiny.yaml")
    return {k: tiny.get(k) for k in BLOCK_OPTIONS}


@pytest.mark.e2e
@pytest.mark.parametrize(("experiment", "dropout"), [("compare", 0.0), ("compare_gpu", 0.1)])
def test_comparison_cells_use_the_papers_block_options(experiment, dropout):
    """No task's own recipe reaches the comparison: every cell has the preset's (the paper's) block options. The
    one exception is the CPU comparison's dropout 0, set for every cell alike by experiment=compare."""
    paper = {**paper_block_options(), "dropout": dropout}
    for cell in CELLS:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose("config", overrides=[f"experiment={experiment}", "+arch=decoder_only", f"+benchmark={cell}"])
        assert {k: cfg.model.get(k) for k in BLOCK_OPTIONS} == paper, cell


@pytest.mark.e2e
def test_plain_cells_share_block_options_within_a_task():
    """`+arch=A task=T` (the 3 x 3 table, prefix_lm too): within a task every architecture gets the same block
    options, so a task's recipe (task=lm: dropout 0) applies to every architecture alike; the main job is the
    decoder_only lm cell, with 64 x 16 windows and dropout 0 on the paper's block."""
    for task in CELLS:
        options = {}
        for arch in ARCHS:
            with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
                cfg = compose("config", overrides=[f"+arch={arch}", f"task={task}"])
            options[arch] = {k: cfg.model.get(k) for k in BLOCK_OPTIONS}
        assert all(o == options[ARCHS[0]] for o in options.values()), f"{task}: {options}"
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        main = compose("config", overrides=["+arch=decoder_only"])
    assert {k: main.model.get(k) for k in BLOCK_OPTIONS} == {**paper_block_options(), "dropout": 0.0}
    assert (main.data.block_size, main.data.batch_size, main.trainer.max_steps) == (64, 16, 1000)


# ---- experiment=compare on a user's data config -------------------------------------------------------------
USER_DATA = {  # the user's config name -> (its task, so the benchmark it runs in)
    "my_pairs": "translation",
    "my_topics": "classification",
    "my_plays": "lm",
}


@pytest.fixture(scope="module")
def user_data(tmp_path_factory):
    """Three data configs of a user's own (parallel text, a classification table, a corpus), in a folder outside
    the repo, over files written from the shared datasets; returns the hydra.searchpath override."""
    from zoo_run import multi30k_pairs, shakespeare_text, sst2_rows

    d = tmp_path_factory.mktemp("user")
    for split, n in (("train", 400), ("val", 40)):
        pairs = multi30k_pairs(split, n)
        for k, lang in enumerate(("de", "en")):
            (d / f"{split}.{lang}").write_text("".join(p[k] + "\n" for p in pairs), encoding="utf-8")
    (d / "topics.csv").write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in sst2_rows("train", 400)))
    (d / "plays.txt").write_text(shakespeare_text(20000), encoding="utf-8")
    conf = d / "conf" / "data"
    conf.mkdir(parents=True)
    common = f"data_dir: {d / 'data'}\n"
    (conf / "my_pairs.yaml").write_text(
        f"defaults: [parallel_text]\ntrain: {{src: {d}/train.de, tgt: {d}/train.en}}\n"
        f"val: {{src: {d}/val.de, tgt: {d}/val.en}}\nsrc_lang: de\ntgt_lang: en\nname: my_pairs\n{common}"
    )
    (conf / "my_topics.yaml").write_text(f"defaults: [text_classification]\ntrain: {d}/topics.csv\n{common}")
    (conf / "my_plays.yaml").write_text(f"defaults: [text_corpus]\nfile: {d}/plays.txt\n{common}")
    return f"hydra.searchpath=[file://{d / 'conf'}]"


def sweep_params(overrides):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["experiment=compare", *overrides], return_hydra_config=True)
    return cfg.hydra.sweeper.params


def test_a_users_data_sweeps_the_benchmark_of_its_task(user_data):
    """`-m experiment=compare data=<user config>` sweeps every arch and seed in the one benchmark whose task reads
    the data (not the three built-in cells, two of which would refuse it); without data= the three cells."""
    for name, task in USER_DATA.items():
        params = sweep_params([f"data={name}", user_data])
        assert params["+benchmark"] == task
        assert sorted(params["+arch"].split(",")) == sorted(ARCHS) and params["seed"] == "1,2,3"
    assert sweep_params([])["+benchmark"] == "classification,lm,translation"
    assert sweep_params(["data=multi30k"])["+benchmark"] == "translation"  # a built-in config: its own cell only
    assert sweep_params(["compare.benchmarks=[lm,translation]"])["+benchmark"] == "lm,translation"
    assert sweep_params(["compare.benchmarks=lm"])["+benchmark"] == "lm"


def test_data_of_no_task_is_refused_before_any_job(capsys):
    from zoo.run.conf import compare_benchmarks

    with pytest.raises(SystemExit) as e:
        compare_benchmarks(["classification", "lm", "translation"], "collections.OrderedDict", ["data=weird"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "experiment=compare with data=weird" in err and "parallel_text" in err


def test_separate_vocabularies_are_refused_with_the_matching_fix(user_data, tmp_path):
    """Separate source and target vocabularies would give encoder_decoder two embeddings: experiment=compare
    refuses them before any data work, naming data.joint_vocab=true (not model.share_embeddings=false)."""
    from zoo.errors import ConfigError

    job = ["experiment=compare", "+benchmark=translation", "data=my_pairs", "data.joint_vocab=false", user_data]
    for arch in ARCHS:
        cfg = make_cfg(tmp_path / arch, job, arch=arch)
        with pytest.raises(ConfigError, match="set data.joint_vocab=true$"):
            check_config(cfg)


def built_params(tmp_path, overrides, arch, info) -> int:
    """Parameters of the model a run of `overrides` builds with the data's model_info (no training)."""
    cfg = make_cfg(tmp_path / arch, overrides, arch=arch)
    check_config(cfg)
    model = model_dict(cfg)
    model.update({k: info[k] for k in FROM_DATA if k in info})
    task = instantiate(cfg.task, arch=cfg.arch, model=model, tokenizer=info["tokenizer"], _convert_="all")
    return param_count(task.model)


@pytest.mark.e2e
@pytest.mark.parametrize("name", list(USER_DATA))
def test_user_data_parameters_match_within_ten_percent(name, user_data, tmp_path):
    """Each job of the sweep above reads the user's data in its task's benchmark, and the models of the four
    +arch choices have parameter counts within the built-in cells' 10%; a plain `-m +arch=...` sweep on the same
    data (model=tiny for every arch) gives encoder_decoder far more (4 + 4 layers and two embeddings)."""
    task = USER_DATA[name]
    job = ["experiment=compare", f"+benchmark={task}", f"data={name}", user_data]
    cfg = make_cfg(tmp_path / "data", job, arch="decoder_only")
    user_dir = user_data.split("file://")[1].rstrip("]").rsplit("/conf", 1)[0]
    assert user_dir in str(cfg.data.get("train") or cfg.data.get("file"))  # the user's files, not the cell's data
    assert cfg.task._target_ == CELLS[task][1]
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup()
    info = dm.model_info()
    params = {arch: built_params(tmp_path / "compare", job, arch, info) for arch in ARCHS}
    spread = (max(params.values()) - min(params.values())) / max(params.values())
    assert spread <= 0.10, f"{name}: parameter counts {params} differ by {spread:.1%} (> 10%)"
    plain = {a: built_params(tmp_path / "plain", [f"data={name}", f"task={task}", user_data], a, info) for a in ARCHS}
    assert plain["encoder_decoder"] > 1.3 * plain["decoder_only"], plain


@pytest.mark.slow
@pytest.mark.e2e
def test_one_command_compares_the_archs_on_a_users_data(user_data, tmp_path):
    """The docs' command: one multirun trains the four +arch choices on the user's parallel text in the translation
    cell; every results.json names the user's dataset and the parameter counts agree within 10%."""
    from zoo_run import run_cli

    sweep = tmp_path / "sweep"
    out = run_cli(
        [
            "-m",
            "experiment=compare",
            "data=my_pairs",
            user_data,
            *("compare.seeds=1", "compare.budget=steps", "trainer.max_steps=2", "logger=csv", "threads=1"),
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    runs = {r.parent.name: json.loads(r.read_text()) for r in sweep.glob("*/results.json")}
    assert sorted(runs) == sorted(f"translation-{a}-seed1" for a in ARCHS)
    for r in runs.values():
        assert (r["status"], r["task"], r["dataset"], r["steps"]) == ("ok", "translation", "my_pairs", 2)
    params = [r["params"] for r in runs.values()]
    assert (max(params) - min(params)) / max(params) <= 0.10, params

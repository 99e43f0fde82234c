"""experiment=scaling's design as the command line sets it: a size's documented seeds and budgets take a plain
override (and a typo of them is answered with the key meant), and a design value the resolvers divide by, a
window the models cannot take or an empty scaling.sizes is refused naming the key, before anything trains."""

import pytest
from omegaconf import OmegaConf
from test_scaling_plan import plan_one_job
from zoo_run import make_cfg

from zoo.errors import ConfigError
from zoo.run.budget import unwrapped
from zoo.run.cli_overrides import typos
from zoo.run.conf import CONF_DIR
from zoo.run.job import checked_config
from zoo.scaling.design import check_design
from zoo.scaling.grid import cells

SCALING = ["experiment=scaling", "+benchmark=scaling"]


def test_a_sizes_seeds_and_budgets_take_a_plain_override(tmp_path):
    """docs/scaling-laws.md writes scaling.sizes.s1.seeds=2 without a +: it composes, and s1 then runs seeds 1
    and 2 (s3, the seed size, its 3; the others 1; then the cosine checks of s1 and s2)."""
    argv = ["scaling.sizes.s1.seeds=2", "scaling.sizes.s5.budgets=[1,2]"]
    assert typos(["-m", "experiment=scaling", *argv], CONF_DIR) == []
    s = make_cfg(tmp_path, [*SCALING, *argv]).scaling
    assert list(s.sizes.s5.budgets) == [1, 2]
    study = cells(s.sizes, s.seed_size, s.seeds, s.check_sizes, s.tune_seeds, s.stage, s.check_seeds).split(",")
    tuning = [c for c in study if "_lr" in c]  # the tuning stage comes first
    assert study[: len(tuning)] == tuning and study[len(tuning) :] == (
        "s1_seed1,s1_seed2,s2_seed1,s3_seed1,s3_seed2,s3_seed3,s4_seed1,s5_seed1,s1_seed1_cosine,s2_seed1_cosine"
    ).split(",")


def test_a_sweepers_dotted_key_gets_advice_that_works():
    """hydra.sweeper.params holds "scaling.cell" as one key: the advice is the command line's own sweep, not the
    same path again (which Hydra refuses too)."""
    found = typos(["-m", "experiment=scaling", "hydra.sweeper.params.scaling.cell=s1_seed1"], CONF_DIR)
    assert len(found) == 1 and "did you mean" not in found[0], found
    assert found[0].endswith("give it on the command line instead: scaling.cell=A,B")
    assert typos(["-m", "experiment=scaling", "scaling.cell=s1_seed1,s2_seed1"], CONF_DIR) == []


def test_a_typo_of_seeds_names_the_key_meant():
    found = typos(["-m", "experiment=scaling", "scaling.sizes.s1.seed=2"], CONF_DIR)
    assert len(found) == 1 and "did you mean scaling.sizes.s1.seeds?" in found[0], found


@pytest.mark.parametrize(
    "override, message",
    [
        ("scaling.sizes.s1.batch_size=0", "scaling.sizes.s1.batch_size=0 must be a positive whole number of windows"),
        ("scaling.block_size=0", "scaling.block_size=0 must be a positive whole number of tokens per window"),
        ("scaling.block_size=100000", "scaling.block_size=100000 is larger than model.max_len=256"),
    ],
)
def test_one_jobs_bad_design_value_is_named(tmp_path, override, message):
    """One job (python -m zoo experiment=scaling +arch=... +benchmark=scaling ...) checks its config before
    check_design, and its trainer.max_steps and warm-up are resolvers that divide by the batch's tokens: a
    batch_size or block_size of 0 is refused naming the key (it raised a bare ZeroDivisionError), and a window
    longer than the models take names scaling.block_size, the key set (not data.block_size)."""
    with pytest.raises(Exception) as e:
        checked_config(make_cfg(tmp_path, [*SCALING, override]))
    cause = unwrapped(e.value)
    assert isinstance(cause, ConfigError) and str(cause).startswith(message), repr(cause)


def test_a_budget_under_two_batches_names_the_block_size():
    """check_design's refusal of a budget of too few batches names scaling.block_size beside the batch: at
    block_size 100000, s1's budget 50 (50 x N = 506,000 tokens) is round(0.63) = 1 batch of 8 x 100000 tokens."""
    s = OmegaConf.create(OmegaConf.to_container(OmegaConf.load(f"{CONF_DIR}/experiment/scaling.yaml").scaling))
    s.block_size = 100000
    with pytest.raises(ConfigError) as e:
        check_design(s)
    assert str(e.value) == (
        "scaling.sizes.s1.batch_size=8: budget 50 tokens per parameter is 1 batch(es) of 800,000 tokens (8 windows "
        "of scaling.block_size=100000); lower the batch or scaling.block_size, or raise scaling.sizes.s1.budgets"
    )


def test_a_window_longer_than_the_models_take_is_named_in_the_plan(tmp_path, monkeypatch, capsys):
    """The sweep's plan refuses scaling.block_size=100000 naming it and the bound, model.max_len (it advised a
    smaller batch or larger budgets, without naming block_size)."""
    code, err = plan_one_job(tmp_path, monkeypatch, capsys, "decoder_only", "scaling.block_size=100000")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "zoo: error: scaling.block_size=100000 is longer than model.max_len=256, the longest window the models "
        "take: lower scaling.block_size to at most 256, or raise model.max_len"
    )


@pytest.mark.parametrize("multirun", [["-m", "experiment=scaling"], [*SCALING, "+arch=decoder_only"]])
def test_an_empty_sizes_is_refused_not_merged(multirun):
    """scaling.sizes={} is merged into the sizes by Hydra, a no-op that ran the default study: refused, naming the
    way to drop a size."""
    assert typos([*multirun, "scaling.sizes={}"], CONF_DIR) == [
        "scaling.sizes={} changes nothing: Hydra merges {} into scaling.sizes, which keeps its entries (s1, s2, s3, "
        "s4, s5); drop one with '~scaling.sizes.s1', and keep at least one"
    ]


def test_seed_start_moves_the_study_cells_and_not_the_tuning_runs():
    """scaling.seed_start=3 with the LM preset's tuning seeds 1 and 2: the preset's sweep (hydra.sweeper.params,
    resolved) tunes on seeds 1 and 2 and runs the study cells from seed 3 (s3, the seed size: 3, 4, 5), so no cell
    repeats a tuning run; the cool-down check's cells move with them (each is read beside the study cell of its
    seed); seed_start 0 is refused naming the key."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(
            "config", ["experiment=scaling", "scaling.seed_start=3", "scaling.check_sizes=[]"], return_hydra_config=True
        )
    swept = str(cfg.hydra.sweeper.params["scaling.cell"]).split(",")
    tuning = [c for c in swept if "_lr" in c]
    assert {c.split("_")[1] for c in tuning} == {"seed1", "seed2"} and swept[: len(tuning)] == tuning
    assert swept[len(tuning) :] == "s1_seed3,s2_seed3,s3_seed3,s3_seed4,s3_seed5,s4_seed3,s5_seed3".split(",")
    s = cfg.scaling
    checked = cells(s.sizes, s.seed_size, s.seeds, s.check_sizes + ["s1", "s2"], s.tune_seeds, "all", 2, 1, 3)
    assert checked.endswith(",s5_seed3,s1_seed3_cosine,s1_seed4_cosine,s2_seed3_cosine,s2_seed4_cosine")
    with pytest.raises(ConfigError, match=r"scaling.seed_start=0 must be a positive whole number"):
        cells(s.sizes, s.seed_size, s.seeds, [], s.tune_seeds, "all", 1, s.tune_seed_start, 0)

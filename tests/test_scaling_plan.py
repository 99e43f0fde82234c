"""experiment=scaling's grid and plan (zoo.scaling.grid, zoo.run.scaling_plan): cells, matched shapes, step
budgets in closed form, the plan's N, D, C, and the refusal of a plan over its time budget."""

import json
import math

import pytest
from omegaconf import OmegaConf
from zoo_run import make_cfg, needs_shared, run_cli

from zoo.errors import ConfigError
from zoo.model import ModelConfig, build_model
from zoo.model.cost import non_embedding_param_count
from zoo.run.scaling_plan import PlanRow, check_budget, check_run_dirs, plan_table
from zoo.run.train import CONF_DIR
from zoo.scaling.grid import cell_seed, cell_size, cells, d_ff, layers, size_non_embedding, steps

SCALING = OmegaConf.load(f"{CONF_DIR}/experiment/scaling.yaml").scaling
SIZES = SCALING.sizes


def test_cells_put_the_extra_seeds_at_one_size_smallest_first():
    sizes = {"a": {}, "b": {}, "c": {}}
    assert cells(sizes, "b", 3) == "a_seed1,b_seed1,b_seed2,b_seed3,c_seed1"
    assert (cell_size("b_seed3"), cell_seed("b_seed3")) == ("b", 3)
    with pytest.raises(ConfigError, match="scaling.seed_size=z is not a key of scaling.sizes"):
        cells(sizes, "z", 2)
    with pytest.raises(ConfigError, match="must be SIZE_seedN"):
        cell_size("b-3")
    assert cell_size("c_seed2", sizes) == "c"
    with pytest.raises(ConfigError, match=r"names size 'z', which scaling.sizes does not define; pick one of a, b, c"):
        cell_size("z_seed1", sizes)


@pytest.mark.parametrize("name", list(SIZES))
def test_the_three_archs_have_matched_non_embedding_parameters(name):
    """At every default size the encoder_decoder split (half the layers a side, d_ff 3 d) has the
    decoder_only / encoder_only non-embedding count within 1% (12 d^2 per layer: 10 d^2 + 14 d^2 a pair)."""
    size = SIZES[name]
    counts = {}
    for arch in ("decoder_only", "encoder_only", "encoder_decoder"):
        cfg = ModelConfig(
            vocab_size=65,
            d_model=size.d_model,
            n_heads=size.n_heads,
            n_layers=layers(arch, size.n_layers),
            d_ff=d_ff(arch, size.d_model),
            share_embeddings=True,
        )
        counts[arch] = non_embedding_param_count(build_model(arch, cfg))
    assert max(counts.values()) / min(counts.values()) < 1.01
    assert counts["decoder_only"] == size_non_embedding(size)
    # per post-LN layer: Q, K, V, O (4 d^2 + 4 d), the FFN (8 d^2 + 5 d), two LayerNorms (4 d); no final norm
    d = size.d_model
    assert counts["decoder_only"] == size.n_layers * (12 * d**2 + 13 * d)


def test_default_sizes_span_16x_in_non_embedding_parameters():
    n = [size_non_embedding(s) for s in SIZES.values()]
    assert len(n) >= 4 and n == sorted(n) and n[-1] / n[0] >= 16


def test_steps_read_the_budget_in_whole_evaluation_intervals():
    size = {"d_model": 32, "n_heads": 2, "n_layers": 2}
    N = size_non_embedding(size)
    interval = math.ceil(2 * N / (32 * 128))
    assert steps(size, 2, 32, 128) == interval
    assert steps(size, 8, 32, 128, 2) == 4 * interval
    with pytest.raises(ConfigError, match="must be a multiple of scaling.eval_every=3"):
        steps(size, 8, 32, 128, 3)
    assert layers("encoder_decoder", 4) == 2 and layers("decoder_only", 3) == 3
    with pytest.raises(ConfigError, match="use an even number"):
        layers("encoder_decoder", 3)


def test_a_cell_composes_to_its_size_seed_and_budget(tmp_path):
    cfg = make_cfg(
        tmp_path, ["experiment=scaling", "+benchmark=scaling", "scaling.cell=s2_seed3"], arch="encoder_decoder"
    )
    s = SIZES.s2
    assert (cfg.seed, cfg.model.d_model, cfg.model.n_layers, cfg.model.d_ff) == (3, s.d_model, 1, 3 * s.d_model)
    assert cfg.task._target_.endswith("LanguageModeling") and cfg.task.scheduler.min_lr == cfg.task.optimizer.lr
    every, top = cfg.scaling.eval_every, cfg.scaling.max_tokens_per_param
    assert cfg.trainer.val_check_interval == steps(s, every, 32, 128)
    assert cfg.trainer.max_steps == (top // every) * cfg.trainer.val_check_interval


def test_a_plan_over_its_budget_is_refused_with_its_numbers():
    rows = [PlanRow("decoder_only", "s1_seed1", 100, 90, 10, 2, 9000, 1e9, 40.0)] * 3
    check_budget(rows, 120.0)  # exactly at the budget: accepted
    with pytest.raises(ConfigError, match=r"estimated 120 s, over scaling.time_budget_s=100; its longest job"):
        check_budget(rows, 100.0)
    table = plan_table(rows)
    assert "3 jobs, estimated 120 s in all" in table and "100.0" in table  # D/N = 9000 / 90


def test_two_jobs_that_would_share_a_run_directory_are_refused(tmp_path):
    """experiment=scaling names a job's directory by arch, cell and budget: a sweep over the budget is distinct,
    one over another key (the lr) is refused until hydra.sweep.subdir names that key too."""
    base = ["experiment=scaling", "+benchmark=scaling", "scaling.cell=s1_seed1"]
    subdir = "${hydra:runtime.choices.arch}-${scaling.cell}-tpp${scaling.max_tokens_per_param}"
    budgets = [("decoder_only", make_cfg(tmp_path, [*base, f"scaling.max_tokens_per_param={t}"])) for t in (4, 8)]
    check_run_dirs(budgets, subdir)
    lrs = [("decoder_only", make_cfg(tmp_path, [*base, f"task.optimizer.lr={lr}"])) for lr in (1e-3, 2e-3)]
    with pytest.raises(ConfigError, match=r"jobs 0 and 1 of the sweep would write the same run directory "):
        check_run_dirs(lrs, subdir)
    with pytest.raises(ConfigError, match=rf"'decoder_only-s1_seed1-tpp{SCALING.max_tokens_per_param}'"):
        check_run_dirs(lrs, subdir)
    check_run_dirs(lrs, subdir + "-lr${task.optimizer.lr}")


@pytest.mark.e2e
@needs_shared
def test_experiment_scaling_prints_its_plan_and_refuses_it_over_budget(tmp_path):
    """One size (the others dropped on the command line): the plan is printed with every job, written to
    plan.json, and refused (exit 2) before anything trains. ENTP re-reads each prefix: its C is 2 to 2.5 x
    decoder_only's at the same D (K = 4 strata cost about (K + 1) / 2 causal forwards; attention less)."""
    drop = [f"~scaling.sizes.{k}" for k in SIZES if k != "s1"]
    r = run_cli(
        [
            "-m",
            "experiment=scaling",
            *drop,
            "scaling.seed_size=s1",
            "scaling.seeds=1",
            "scaling.time_budget_s=1",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            # an override holding ${hydra:...}, as check_run_dirs' message suggests: read as typed, not resolved
            "hydra.sweep.subdir=${hydra:runtime.choices.arch}-${scaling.cell}-lr${task.optimizer.lr}",
        ],
        cwd=tmp_path,
        env={"ZOO_DATA_MIRROR": str(__import__("conftest").SHARED_DATA)},
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert "zoo: scaling plan" in r.stdout and "4 jobs, estimated" in r.stdout
    assert "over scaling.time_budget_s=1" in r.stderr
    rows = {row["arch"]: row for row in json.loads((tmp_path / "sweep" / "plan.json").read_text())}
    assert set(rows) == {"decoder_only", "prefix_lm", "encoder_decoder", "encoder_only"}
    assert not list((tmp_path / "sweep").glob("*/results.json"))  # nothing trained
    dec, entp = rows["decoder_only"], rows["encoder_only"]
    assert dec["tokens"] == entp["tokens"] == dec["steps"] * 32 * 128
    assert 2.0 < entp["flops"] / dec["flops"] < 2.5

"""experiment=scaling's grid and plan (zoo.scaling.grid, zoo.run.scaling_plan): cells, matched shapes, the
trunk and cool-down steps in closed form, the design's refusals, the plan's N, D, C, and the refusal of a plan
over its time budget."""

import dataclasses
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from zoo_run import make_cfg, needs_shared, run_cli

from zoo.errors import ConfigError
from zoo.model.cost import non_embedding_param_count
from zoo.run.conf import CONF_DIR
from zoo.run.scaling_plan import PlanRow, check_budget, check_run_dirs, plan_table
from zoo.scaling.design import check_design
from zoo.scaling.grid import cell_branches, cell_is_check, cell_seed, cell_size, cells
from zoo.scaling.sizes import branches, family_model, layers, size_non_embedding, warmup_steps

SCALING = OmegaConf.load(f"{CONF_DIR}/experiment/scaling.yaml").scaling
SIZES = SCALING.sizes


def preset(*names: str):
    """scaling.yaml's `scaling` with each experiment preset of `names` merged over it in turn (its defaults chain)."""
    cfg = OmegaConf.create({"scaling": SCALING})
    for name in names:
        cfg = OmegaConf.merge(cfg, OmegaConf.load(f"{CONF_DIR}/experiment/{name}.yaml"))
    return cfg.scaling


def test_cells_put_the_extra_seeds_at_one_size_smallest_first():
    """seeds at seed_size, 1 elsewhere, unless a size sets its own (experiment=scaling_long: 2 everywhere)."""
    sizes = {"a": {}, "b": {}, "c": {}}
    assert cells(sizes, "b", 3) == "a_seed1,b_seed1,b_seed2,b_seed3,c_seed1"
    assert cells({"a": {"seeds": 2}, "b": {"seeds": 1}, "c": {}}, "b", 3) == "a_seed1,a_seed2,b_seed1,c_seed1"
    for bad in (0, 1.5, "2"):
        with pytest.raises(ConfigError, match=rf"scaling.sizes.a.seeds={bad!r} must be a positive whole number"):
            cells({"a": {"seeds": bad}, "b": {}}, "b", 1)
    assert cells(sizes, "b", 1, ["a"]) == "a_seed1,b_seed1,c_seed1,a_seed1_cosine"
    assert (cell_size("b_seed3"), cell_seed("b_seed3")) == ("b", 3)
    assert cell_is_check("a_seed1_cosine") and not cell_is_check("a_seed1")
    assert (cell_size("a_seed1_cosine"), cell_seed("a_seed1_cosine")) == ("a", 1)
    with pytest.raises(ConfigError, match="scaling.check_sizes names 'z'"):
        cells(sizes, "b", 1, ["z"])
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
    counts = {
        arch: non_embedding_param_count(
            family_model(arch, size.d_model, size.n_heads, size.n_layers, 65, share_embeddings=True)
        )
        for arch in ("decoder_only", "encoder_only", "encoder_decoder")
    }
    assert max(counts.values()) / min(counts.values()) < 1.01
    assert counts["decoder_only"] == size_non_embedding(size)
    # per post-LN layer: Q, K, V, O (4 d^2 + 4 d), the FFN (8 d^2 + 5 d), two LayerNorms (4 d); no final norm
    d = size.d_model
    assert counts["decoder_only"] == size.n_layers * (12 * d**2 + 13 * d)


def test_default_design_meets_the_studys_targets():
    """At least 5 sizes spanning 30x in non-embedding parameters, budgets up to 20 tokens per parameter at every
    size, and at every size the first budget's cool-down starting after the warm-up (check_design accepts the
    preset); every size has one shape (2 layers; encoder_decoder 1 a side), so N varies by width alone;
    experiment=scaling_long runs 8 seeds at s1-s3 and 5 at s4 and s5 (the gates on the intervals need two or more)."""
    from zoo.scaling.sizes import size_budgets, size_seeds

    n = [size_non_embedding(s) for s in SIZES.values()]
    assert len(n) >= 5 and n == sorted(n) and n[-1] / n[0] >= 30
    assert all(max(size_budgets(s, SCALING.budgets)) >= 20 for s in SIZES.values())
    check_design(SCALING)
    long = preset("scaling_long")
    assert {k: size_seeds(k, v, long.seed_size, long.seeds) for k, v in long.sizes.items()} == dict(
        s1=8, s2=8, s3=8, s4=5, s5=5
    )
    assert {s.n_layers for s in SIZES.values()} == {2}
    check_design(long)


def test_the_depth_ladder_keeps_the_records_sizes_and_budgets():
    """experiment=scaling_ladder deepens s3-s5 to 3, 4, 4 layers at d_model 40, 56, 84: N = L (12 d^2 + 13 d)
    within 5% of the record's 2-layer size, the record's budgets and seeds (8, 5, 5), d_head even (RoPE), and each
    size's 5-rate grid holding the record's tuned best strictly inside (experiments/scaling/lr_sweep.csv: 8e-3,
    4e-3, 2.8e-3)."""
    from zoo.scaling.sizes import size_budgets, size_seeds

    ladder = preset("scaling_long", "scaling_ladder")
    record_best = {"s3": 8e-3, "s4": 4e-3, "s5": 2.8e-3}
    want = {"s3": (3, 40, 59_160), "s4": (4, 56, 153_440), "s5": (4, 84, 343_056)}
    for k, (n_layers, d, n) in want.items():
        size, old = ladder.sizes[k], SIZES[k]
        assert (size.n_layers, size.d_model) == (n_layers, d)
        assert size_non_embedding(size) == n_layers * (12 * d**2 + 13 * d) == n
        assert abs(n / size_non_embedding(old) - 1) < 0.05
        assert (size.d_model // size.n_heads) % 2 == 0 and size.d_model % size.n_heads == 0
        assert size_budgets(size, ladder.budgets) == size_budgets(old, SCALING.budgets)
        assert size_seeds(k, size, ladder.seed_size, ladder.seeds) == {"s3": 8, "s4": 5, "s5": 5}[k]
        grid = list(size.lr_grid)
        assert len(grid) == 5 and grid[0] < record_best[k] < grid[-1]
    assert {k: ladder.sizes[k].n_layers for k in ("s1", "s2")} == {"s1": 2, "s2": 2}  # the record's cells
    assert list(ladder.check_sizes) == []
    check_design(ladder)


def test_one_shape_rule_is_4_layers_and_d_head_14_at_every_size():
    """experiment=scaling_depth4: 4 layers and d_head 14 at every size, N = 4 (12 d^2 + 13 d) spanning >= 30x, the
    record's budgets and seeds (8, 8, 8, 5, 5); s4 and s5 exactly the depth ladder's sizes (so its cells are
    taken); s1-s3 each with a 5-rate grid."""
    from zoo.scaling.sizes import size_budgets, size_seeds

    ladder = preset("scaling_long", "scaling_ladder")
    rule = preset("scaling_long", "scaling_ladder", "scaling_depth4")
    want = {"s1": (14, 10_136), "s2": (28, 39_088), "s3": (42, 86_856), "s4": (56, 153_440), "s5": (84, 343_056)}
    for k, (d, n) in want.items():
        size = rule.sizes[k]
        assert (size.n_layers, size.d_model, size.d_model // size.n_heads) == (4, d, 14)
        assert size.d_model % size.n_heads == 0
        assert size_non_embedding(size) == 4 * (12 * d**2 + 13 * d) == n
        assert size_budgets(size, rule.budgets) == size_budgets(SIZES[k], SCALING.budgets)
        assert size_seeds(k, size, rule.seed_size, rule.seeds) == {"s4": 5, "s5": 5}.get(k, 8)
        assert len(size.lr_grid) == 5
    assert want["s5"][1] / want["s1"][1] >= 30
    for k in ("s4", "s5"):
        assert rule.sizes[k] == ladder.sizes[k]
    assert list(rule.check_sizes) == []
    check_design(rule)


def test_depth_grows_with_width_at_one_aspect_ratio():
    """experiment=scaling_depthwidth: d_model = 10 n_layers and d_head 10 at every size, 2 to 7 layers, N = L (12 d^2
    + 13 d) spanning >= 40x; s1 the record's s1 (shape and budgets); each later size's budgets about 0.5-4 M tokens
    (s2-s4) or 5-20 tokens per parameter (s5-s6), the plays read at most 4 times; seeds 8, 8, 5, 5, 5; 5 rates a
    size; three sizes under N_max / 4, so that the long reach can be checked."""
    from zoo.scaling.sizes import size_budgets, size_seeds

    rule = preset("scaling_long", "scaling_depthwidth")
    layers_of = {"s1": 2, "s2": 3, "s3": 4, "s4": 5, "s5": 6, "s6": 7}
    n = {}
    for k, L in layers_of.items():
        size = rule.sizes[k]
        d = 10 * L
        assert (size.n_layers, size.d_model, size.n_heads, size.d_model // size.n_heads) == (L, d, L, 10)
        n[k] = size_non_embedding(size)
        assert n[k] == L * (12 * d**2 + 13 * d)
        if k != "s1":
            assert size_seeds(k, size, rule.seed_size, rule.seeds) == (8 if k in ("s2", "s3") else 5)
            assert len(size.lr_grid) == 5
    assert rule.sizes.s1 == preset("scaling_long").sizes.s1 and n["s1"] == 10_120
    assert n["s6"] / n["s1"] >= 40 and sorted(n.values()) == [n[k] for k in layers_of]
    assert sum(v <= n["s6"] / 4 for v in n.values()) == 3
    tokens = {k: [b * n[k] for b in size_budgets(rule.sizes[k], rule.budgets)] for k in ("s2", "s3", "s4")}
    for k, ds in tokens.items():
        want = [0.5e6, 1e6, 2e6, 4e6] if k != "s4" else [1e6, 2e6, 4e6]
        assert ds == pytest.approx(want, rel=0.03), k
    assert max(size_budgets(rule.sizes.s6, rule.budgets)) * n["s6"] <= 4 * 4_470_805  # the plays' training tokens
    assert list(rule.check_sizes) == []
    check_design(rule)


def test_encoder_decoder_ladder_holds_each_stacks_aspect_ratio():
    """experiment=scaling_depthwidth_encdec: k layers a side (n_layers 2k), d_model = 10 k, d_head 10, k = 1 to 6;
    the study's N = 2k (12 d^2 + 13 d), 4 k d below encoder_decoder's own count (10 d^2 + 12 d per encoder layer,
    14 d^2 + 18 d per decoder layer with d_ff 3 d, post-LN: no final norm); budgets 0.5-4 M tokens at
    s1-s3, 1-4 M at s4; seeds 8, 8, 8, 5, 5, 5; three sizes under N_max / 4."""
    from zoo.scaling.sizes import size_budgets, size_seeds

    rule = preset("scaling_long", "scaling_depthwidth", "scaling_depthwidth_encdec")
    n = {}
    for k in range(1, 7):
        name, d = f"s{k}", 10 * k
        size = rule.sizes[name]
        assert (size.n_layers, size.d_model, size.n_heads) == (2 * k, d, k)
        n[name] = size_non_embedding(size)
        assert n[name] == 2 * k * (12 * d**2 + 13 * d)
        own = k * (10 * d**2 + 12 * d) + k * (14 * d**2 + 18 * d)
        model = family_model("encoder_decoder", d, k, 2 * k, vocab_size=65)
        assert non_embedding_param_count(model) == own
        assert own - n[name] == 4 * k * d  # the biases: 1.5% of N at s1, 0.3% at s6
        assert (model.cfg.encoder_layers, model.cfg.decoder_layers) == (k, k)
        assert size_seeds(name, size, rule.seed_size, rule.seeds) == (8 if k <= 3 else 5)
        assert len(size.lr_grid) == 5
    assert n["s6"] / n["s1"] >= 40 and sum(v <= n["s6"] / 4 for v in n.values()) == 3
    for k in ("s1", "s2", "s3", "s4"):
        want = [0.5e6, 1e6, 2e6, 4e6] if k != "s4" else [1e6, 2e6, 4e6]
        assert [b * n[k] for b in size_budgets(rule.sizes[k], rule.budgets)] == pytest.approx(want, rel=0.03), k
    assert max(size_budgets(rule.sizes.s6, rule.budgets)) * n["s6"] <= 4 * 4_470_805  # the plays' training tokens
    check_design(rule)


def test_branches_are_the_budgets_in_closed_form():
    """Budget b ends at round(b N / (batch x block)) steps and cools down from round((1 - cooldown) end); the
    warm-up is round(N / (batch x block)) steps (N tokens)."""
    size = {"d_model": 32, "n_heads": 2, "n_layers": 2, "batch_size": 4, "lr": 1e-3}
    N = size["n_layers"] * (12 * 32**2 + 13 * 32)  # post-LN layer: 12 d^2 + 13 d
    assert size_non_embedding(size) == N == 25408
    got = branches(size, [20, 5, 10], 0.2, 128)
    ends = [round(b * N / 512) for b in (5, 10, 20)]
    assert [(b.tokens_per_param, b.start, b.end) for b in got] == [
        (b, round(0.8 * e), e) for b, e in zip((5.0, 10.0, 20.0), ends)
    ]
    assert ends == [248, 496, 992]
    assert warmup_steps(size, 1.0, 128) == round(N / 512) == 50
    assert layers("encoder_decoder", 4) == 2 and layers("decoder_only", 3) == 3
    with pytest.raises(ConfigError, match="use an even number"):
        layers("encoder_decoder", 3)


def test_a_size_may_set_its_own_budgets_and_a_check_cell_trains_its_three_smallest():
    """s1 sets budgets [5, 20, 40, 80]: its cool-down cell trains those, its cosine check cell [5, 20, 40] alone."""
    from zoo.scaling.grid import cell_branches, job_max_steps

    s = OmegaConf.create(OmegaConf.to_container(SCALING))
    s.sizes.s1.budgets = [80, 5, 40, 20]
    s.budgets = [5, 10, 20]
    N, per_step = size_non_embedding(s.sizes.s1), s.sizes.s1.batch_size * 128
    assert [b.tokens_per_param for b in cell_branches("s1_seed1", s.sizes.s1, s)] == [5.0, 20.0, 40.0, 80.0]
    assert [b.end for b in cell_branches("s1_seed1_cosine", s.sizes.s1, s)] == [
        round(b * N / per_step) for b in (5, 20, 40)
    ]
    assert job_max_steps("s1_seed1", s.sizes, s.budgets, 128) == round(80 * N / per_step)
    assert job_max_steps("s1_seed1_cosine", s.sizes, s.budgets, 128) == round(40 * N / per_step)
    s.sizes.s5.budgets = None  # a size without its own: the study's
    assert [b.end for b in cell_branches("s5_seed1_cosine", s.sizes.s5, s)] == [
        round(b * size_non_embedding(s.sizes.s5) / (s.sizes.s5.batch_size * 128)) for b in (5, 10, 20)
    ]
    s.sizes.s1.budgets = [5, 0]
    with pytest.raises(ConfigError, match=r"scaling.sizes.s1.budgets=\[5, 0\] must be a list of positive"):
        check_design(s)
    s.sizes.s1.budgets = [100, 100.02, 200]  # 988.3 and 988.5 steps: both end at step 988
    assert [b.end for b in branches(s.sizes.s1, s.budgets, 0.2, 128)][:2] == [round(100 * N / per_step)] * 2
    with pytest.raises(ConfigError, match=r"budgets 100 and 100.02 at size s1 both end at step 988 .* a step apart"):
        check_design(s)
    for name in s.sizes:  # no size with its own budgets: the study's alone
        s.sizes[name].budgets = None
    check_design(s)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"cooldown": 1.5}, r"scaling.cooldown=1.5 must be in \(0, 1\)"),
        ({"cooldown": 0}, r"scaling.cooldown=0 must be in \(0, 1\)"),
        ({"budgets": [5, -1]}, r"scaling.budgets=\[5, -1\] must be a list of positive"),
        ({"trunk_tokens_per_param": 10}, r"scaling.trunk_tokens_per_param=10 ends the trunk before the cool-down"),
        ({"sizes.s1.batch_size": 0}, r"scaling.sizes.s1.batch_size=0 must be a positive whole number"),
        ({"sizes.s1.batch_size": 2.5}, r"scaling.sizes.s1.batch_size=2.5 must be a positive whole number"),
        (
            {"sizes.s1.batch_size": 20000},  # s1's budget 50: 506,000 tokens, 0.2 batches of 2,560,000
            r"scaling.sizes.s1.batch_size=20000: budget 50 tokens per parameter is 0 batch\(es\) of 2,560,000 tokens "
            r"\(20000 windows of scaling.block_size=128\); lower the batch or scaling.block_size, or raise "
            r"scaling.sizes.s1.budgets",
        ),
        ({"sizes.s2.budgets": [20, 0]}, r"scaling.sizes.s2.budgets=\[20, 0\] must be a list of positive"),
        (
            {"budgets": [0.5, 20], "sizes.s1.budgets": None, "sizes.s1.batch_size": 4},
            # N 10,120 at 512 tokens a step: warm-up round(19.8) = 20, end round(9.9) = 10, start round(0.8 x 9.9) = 8
            r"scaling.budgets: budget 0.5 at size s1 cools down from step 8 to 10, inside its warm-up of 20",
        ),
        ({"sizes.s1.lr": None}, r"scaling.sizes.s1 needs lr"),
        ({"budgets": 5}, r"scaling.budgets=5 must be a list of positive"),
        ({"sizes.s1.budgets": [400, 50, 50]}, r"scaling.sizes.s1.budgets=\[400, 50, 50\] names a budget twice"),
        ({"sizes.s1.seed": 3}, r"scaling.sizes.s1.seed is not a size key; a size sets d_model"),
        ({"block_size": 0}, r"scaling.block_size=0 must be a positive whole number"),
        ({"warmup_tokens_per_param": None}, r"scaling.warmup_tokens_per_param=None must be a number >= 0"),
        ({"checkpoint_every": -1}, r"scaling.checkpoint_every=-1 must be a whole number of steps >= 0"),
        ({"checkpoint_every": 2.5}, r"scaling.checkpoint_every=2.5 must be a whole number of steps >= 0"),
        ({"check_sizes": "s1"}, r"scaling.check_sizes='s1' must be a list of size names"),
        ({"sizes.s1": None}, r"scaling.sizes.s1=None must be a size \(\{d_model"),
        ({"sizes.s1.n_layers": "abc"}, r"scaling.sizes.s1.n_layers='abc' must be a positive whole number"),
        ({"sizes.s2.d_model": 0}, r"scaling.sizes.s2.d_model=0 must be a positive whole number"),
        ({"cooldown_shape": "square"}, r"scaling.cooldown_shape='square' is not a cool-down shape; allowed: 1-sqrt"),
        ({"sizes.s2.lr": -1}, r"scaling.sizes.s2.lr=-1 must be a positive peak learning rate"),
        ({"sizes.s1.lr": 0}, r"scaling.sizes.s1.lr=0 must be a positive peak learning rate"),
        ({"sizes.s1.lr": "fast"}, r"scaling.sizes.s1.lr='fast' must be a positive peak learning rate"),
    ],
)
def test_a_design_the_study_cannot_run_is_refused_naming_the_key(change, match):
    s = OmegaConf.create(OmegaConf.to_container(SCALING))
    for key, value in change.items():
        OmegaConf.update(s, key, value, force_add=True)
    with pytest.raises(ConfigError, match=match):
        check_design(s)


def test_a_cell_composes_to_its_size_seed_batch_and_schedule(tmp_path):
    fixed = ["scaling.sizes.s2.lr=6.0e-3", "scaling.sizes.s2.lr_grid=null"]  # a fixed rate: the cells run it
    cfg = make_cfg(
        tmp_path, ["experiment=scaling", "+benchmark=scaling", "scaling.cell=s2_seed3", *fixed], arch="encoder_decoder"
    )
    s = SIZES.s2
    assert (cfg.seed, cfg.model.d_model, cfg.model.n_layers, cfg.model.d_ff) == (3, s.d_model, 1, 3 * s.d_model)
    assert cfg.task._target_.endswith("LanguageModeling") and cfg.task.optimizer.lr == 6.0e-3
    assert (cfg.data.batch_size, cfg.data.block_size) == (s.batch_size, 128)
    assert cfg.task.scheduler.kind == "wsd" and cfg.task.scheduler.decay_start is None
    assert cfg.task.scheduler.warmup_steps == round(size_non_embedding(s) / (s.batch_size * 128))
    assert cfg.trainer.max_steps == branches(s, SCALING.budgets, SCALING.cooldown, 128)[-1].end


def test_a_plan_over_its_budget_is_refused_with_its_numbers():
    rows = [PlanRow("decoder_only", "s1_seed1", 100, 90, 10, 2, 1, 9000, 1e9, 40.0, 5.0)] * 3
    check_budget(rows, 120.0)  # exactly at the budget: accepted
    with pytest.raises(ConfigError, match=r"estimated 120 s, over scaling.time_budget_s=100; its longest job"):
        check_budget(rows, 100.0)
    table = plan_table(rows)
    assert "3 jobs, estimated 120 s ± 15 s (12%) for what is left" in table and "100.0" in table  # D/N = 9000 / 90
    assert "1/2" in table  # one of two budgets done
    with pytest.raises(ConfigError, match=r"Lower scaling.sizes.s1.budgets, drop a size"):  # s1 sets its own
        check_budget(rows, 100.0, SIZES)
    with pytest.raises(ConfigError, match=r"Lower scaling.budgets, drop a size"):  # s5 takes the study's
        check_budget([dataclasses.replace(r, cell="s5_seed1") for r in rows], 100.0, SIZES)


def test_a_plan_timed_on_a_busy_machine_says_its_estimate_is_high(monkeypatch):
    """Steps timed beside other work (load average 7.5 on 2 CPUs) inflate the estimate: the refusal says so
    rather than only advising a smaller design; on an idle machine it does not."""
    import zoo.run.plan_timing as plan

    rows = [PlanRow("decoder_only", "s1_seed1", 100, 90, 10, 2, 1, 9000, 1e9, 40.0, 5.0)] * 3
    monkeypatch.setattr(plan.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(plan.os, "getloadavg", lambda: (7.5, 6.0, 5.0))
    with pytest.raises(ConfigError, match=r"timed at a load average of 7.5 on 2 CPUs: other processes slowed"):
        check_budget(rows, 100.0)
    monkeypatch.setattr(plan.os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    with pytest.raises(ConfigError) as refused:
        check_budget(rows, 100.0)
    assert "load average" not in str(refused.value)


def test_two_jobs_that_would_share_a_run_directory_are_refused(tmp_path):
    """experiment=scaling names a job's directory by arch and cell: a sweep over the cell is distinct, one over
    another key (the lr) is refused until hydra.sweep.subdir names that key too."""
    base = ["experiment=scaling", "+benchmark=scaling"]
    subdir = "${hydra:runtime.choices.arch}-${scaling.cell}"
    cells_ = [("decoder_only", make_cfg(tmp_path, [*base, f"scaling.cell={c}"])) for c in ("s1_seed1", "s1_seed2")]
    check_run_dirs(cells_, subdir)
    lrs = [("decoder_only", make_cfg(tmp_path, [*base, f"task.optimizer.lr={lr}"])) for lr in (1e-3, 2e-3)]
    with pytest.raises(ConfigError, match=r"jobs 0 and 1 of the sweep would write the same run directory "):
        check_run_dirs(lrs, subdir)
    with pytest.raises(ConfigError, match=r"'decoder_only-s1_seed1'"):
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
            "scaling.check_sizes=[]",
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
    s1 = SIZES.s1
    last = branches(s1, SCALING.budgets, SCALING.cooldown, 128)
    assert dec["tokens"] == entp["tokens"] == last[-1].end * s1.batch_size * 128
    # the trunk to the last cool-down start, then every cool-down
    assert dec["steps"] == last[-1].start + sum(b.end - b.start for b in last)
    assert 2.0 < entp["flops"] / dec["flops"] < 2.5


@pytest.mark.e2e
@needs_shared
def test_a_bad_design_exits_2_before_the_plan(tmp_path):
    r = run_cli(
        ["-m", "experiment=scaling", "scaling.cooldown=1.5", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=tmp_path,
        env={"ZOO_DATA_MIRROR": str(__import__("conftest").SHARED_DATA)},
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert "zoo: error: scaling.cooldown=1.5 must be in (0, 1)" in r.stderr
    assert "zoo: scaling plan" not in r.stdout


def test_an_unexpected_error_in_the_plan_exits_2_so_nothing_launches(monkeypatch, capsys):
    """Hydra only warns when a callback raises and then launches every job unchecked: the plan turns any error
    (here a TypeError from composing the jobs) into exit 2; a time budget that is not a number is refused first."""
    import zoo.run.sweep_callback as cb

    def broken(config, check_first=None):
        raise TypeError("float() argument must be a string or a real number, not 'NoneType'")

    monkeypatch.setattr(cb, "sweep_jobs", broken)
    config = OmegaConf.create({"scaling": {**OmegaConf.to_container(SCALING), "time_budget_s": 7200}})
    with pytest.raises(SystemExit) as e:
        cb.ScalingPlan().on_multirun_start(config)
    assert e.value.code == 2
    assert "the scaling plan could not check this sweep (TypeError: float() argument" in capsys.readouterr().err
    config.scaling.time_budget_s = None
    with pytest.raises(SystemExit) as e:
        cb.ScalingPlan().on_multirun_start(config)
    assert e.value.code == 2 and "scaling.time_budget_s=None must be a number of seconds" in capsys.readouterr().err


def study_of(job) -> dict:
    """A job's scaling design, as the multirun's own config holds it (ScalingPlan checks it before the jobs)."""
    return OmegaConf.to_container(job.scaling, resolve=True)


def plan_one_job(tmp_path, monkeypatch, capsys, arch: str, override: str) -> tuple[int, str]:
    """ScalingPlan on a sweep of one composed experiment=scaling job (s1_seed1 of `arch` with `override`), which
    it must refuse before timing anything: (exit code, stderr)."""
    import zoo.run.scaling_plan as scaling_plan
    import zoo.run.sweep_callback as cb

    job = make_cfg(tmp_path, ["experiment=scaling", "+benchmark=scaling", "scaling.cell=s1_seed1", override], arch=arch)
    monkeypatch.setattr(cb, "sweep_jobs", lambda config, check_first=None: [(arch, job)])
    monkeypatch.setattr(scaling_plan, "plan", lambda *a, **k: pytest.fail("the plan timed a job it should refuse"))
    config = OmegaConf.create(
        {
            "scaling": {**study_of(job), "time_budget_s": 7200, "job_overhead_s": 10},
            "hydra": {"sweep": {"dir": str(tmp_path / "sweep"), "subdir": "${scaling.cell}"}},
        }
    )
    with pytest.raises(SystemExit) as e:
        cb.ScalingPlan().on_multirun_start(config)
    return e.value.code, capsys.readouterr().err


def test_a_job_config_its_own_run_would_refuse_exits_2_in_the_plan(tmp_path, monkeypatch, capsys):
    """A value only a job's own checks see (here a dropout of 1.5, outside [0, 1)) stops the plan with exit 2 and
    the job's message, before anything is timed or trained, instead of failing each job after launch."""
    code, err = plan_one_job(tmp_path, monkeypatch, capsys, "decoder_only", "model.dropout=1.5")
    assert code == 2
    assert "zoo: error: model.dropout=1.5" in err


def test_a_resolvers_error_reaches_the_user_without_omegaconfs_wrapping(tmp_path, monkeypatch, capsys):
    """An odd n_layers for encoder_decoder fails inside an interpolation (zoo_scaling_layers), and a check re-raises
    it: the plan prints the resolver's own message, not OmegaConf's "raised while resolving" and full_key lines."""
    code, err = plan_one_job(tmp_path, monkeypatch, capsys, "encoder_decoder", "scaling.sizes.s1.n_layers=3")
    assert code == 2
    lines = [line for line in err.splitlines() if not line.startswith("zoo: scaling plan: ")]  # its progress
    assert lines == [
        "zoo: error: a scaling size has n_layers=3: encoder_decoder splits it in halves; use an even number"
    ], err


class _Clock:
    """time.perf_counter for measure(): advanced by each training step (`steps`, seconds each, in order) and by
    each validation batch (`evaluation` seconds)."""

    def __init__(self, steps, evaluation):
        self.now, self.steps, self.evaluation = 0.0, list(steps), evaluation

    def perf_counter(self):
        return self.now


def test_measure_times_repeats_of_the_steps_and_their_spread(monkeypatch):
    """Steps taking 1, 1, 2, 2, 3, 3 s after 2 warm-up steps (3 repeats of 2): a step is 2 s, the fastest repeat 1 s,
    the slowest 3 s, so the spread is ±50%; a validation of 4 batches at 0.5 s is 2 s."""
    import types

    import torch

    import zoo.run.plan_timing as sp

    clock = _Clock([9.0, 9.0, 1, 1, 2, 2, 3, 3], 0.5)

    class Task(torch.nn.Module):
        mask_id, objective_impl = None, types.SimpleNamespace(validation_generator=lambda seed, device: None)

        def __init__(self):
            super().__init__()
            self.model = torch.nn.Linear(3, 3)
            self.model.cfg = types.SimpleNamespace(vocab_size=5)

        def training_loss(self, batch):
            clock.now += clock.steps.pop(0)
            return self.model.weight.sum()

        def losses(self, batch, generator):
            clock.now += clock.evaluation

    monkeypatch.setattr(sp, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    t = sp.measure(Task(), 2, 4, 4)
    assert not clock.steps
    assert (t.step, t.fastest, t.slowest, t.evaluation) == (2.0, 1.0, 3.0, 2.0)
    assert t.spread == 0.5


class _Data:
    train_data = range(10**9)  # tokens: more than any plan reads 4 times (zoo.run.scaling_data.check_passes)

    def prepare_data(self):
        pass

    def setup(self):
        pass

    def model_info(self):
        return {}


def plan_jobs(tmp_path, monkeypatch, capsys, jobs, **scaling) -> tuple[int, str, str]:
    """ScalingPlan on the composed `jobs` ([(arch, job config)]) with scaling.time_budget_s=1 and `scaling` on top,
    each job's plan row 40 s ± 4 s (no timing): (exit code, stdout, stderr)."""
    import zoo.run.scaling_data as scaling_data
    import zoo.run.scaling_plan as scaling_plan
    import zoo.run.sweep_callback as cb

    monkeypatch.setattr(cb, "sweep_jobs", lambda config, check_first=None: jobs)
    monkeypatch.setattr(scaling_data, "instantiate", lambda *a, **k: _Data())
    rows = [PlanRow(arch, str(job.scaling.cell), 100, 90, 10, 2, 0, 9000, 1e9, 40.0, 4.0) for arch, job in jobs]
    monkeypatch.setattr(scaling_plan, "plan", lambda *a, **k: rows)
    config = OmegaConf.create(
        {
            "scaling": {**study_of(jobs[0][1]), "time_budget_s": 1, "job_overhead_s": 10, **scaling},
            "hydra": {
                "sweep": {"dir": str(tmp_path / "sweep"), "subdir": "${hydra:runtime.choices.arch}-${scaling.cell}"}
            },
        }
    )
    with pytest.raises(SystemExit) as e:
        cb.ScalingPlan().on_multirun_start(config)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


FIXED_S1 = ["scaling.sizes.s1.lr=8.0e-3", "scaling.sizes.s1.lr_grid=null"]  # a fixed rate: no tuning stage needed


def scaling_job(tmp_path, arch="decoder_only", *overrides):
    base = ["experiment=scaling", "+benchmark=scaling", "scaling.cell=s1_seed1", *FIXED_S1]
    return make_cfg(tmp_path, [*base, *overrides], arch)


def test_dry_run_prints_the_plan_and_exits_0(tmp_path, monkeypatch, capsys):
    """scaling.dry_run=true (declared false in conf/experiment/scaling.yaml): the plan, plan.json, exit 0 even over
    the time budget; nothing launches. A value that is not a boolean is refused."""
    assert SCALING.dry_run is False
    jobs = [("decoder_only", scaling_job(tmp_path))]
    code, out, _ = plan_jobs(tmp_path, monkeypatch, capsys, jobs, dry_run=True)
    assert code == 0
    assert "zoo: scaling plan" in out and "1 jobs, estimated 40 s ± 4 s (10%)" in out
    assert "zoo: scaling.dry_run=true: the plan only, nothing trained (40 s estimated, scaling.time_budget_s=1)" in out
    assert (tmp_path / "sweep" / "plan.json").is_file()
    code, _, err = plan_jobs(tmp_path, monkeypatch, capsys, jobs, dry_run="yes")
    assert code == 2 and "zoo: error: scaling.dry_run='yes' must be true (print the plan only) or false" in err


def test_the_plan_names_the_architectures_it_leaves_out(tmp_path, monkeypatch, capsys):
    """experiment=scaling_long sweeps three families: its plan says encoder_only is left out and how to add it;
    experiment=scaling's four leave none out."""
    long = OmegaConf.load(f"{CONF_DIR}/experiment/scaling_long.yaml").hydra.sweeper.params["+arch"].split(",")
    assert long == ["decoder_only", "prefix_lm", "encoder_decoder"]
    jobs = [(arch, scaling_job(tmp_path, arch)) for arch in long]
    code, out, _ = plan_jobs(tmp_path, monkeypatch, capsys, jobs, dry_run=True)
    assert code == 0
    assert (
        "left out: encoder_only (add it with the same command and +arch=encoder_only: its cells go into the same "
        "folder)" in out.splitlines()
    )
    from zoo.run.scaling_plan import left_out

    assert left_out(["decoder_only", "prefix_lm", "encoder_decoder", "encoder_only"]) is None
    how = "python -m zoo -m experiment=scaling_long +arch=encoder_only"  # the docs say how to add it
    root = Path(__file__).resolve().parents[1]
    assert how in (root / "conf" / "experiment" / "scaling_long.yaml").read_text(encoding="utf-8")
    assert how in (root / "docs" / "scaling-laws.md").read_text(encoding="utf-8")


def test_the_plan_refuses_a_tuned_cell_whose_best_rate_is_an_edge(tmp_path, monkeypatch, capsys):
    """s1 tuned over [1e-3, 2e-3, 4e-3] with one seed, its tuning points in the sweep folder, 4e-3 the best: the
    plan exits 2 naming the rate to add (8e-3), before anything is timed; with 2e-3 the best it passes."""
    import zoo.run.plan_timing as plan_timing

    tuned = ["scaling.sizes.s1.lr=tuned", "scaling.sizes.s1.lr_grid=[1.0e-3,2.0e-3,4.0e-3]", "scaling.tune_seeds=1"]
    s = scaling_job(tmp_path, "decoder_only", *tuned).scaling
    end = cell_branches("s1_seed1_lr0.001", s.sizes.s1, s)[0].end  # the tuning budget's step
    errs = []
    for best, code_want in ((4e-3, 2), (2e-3, 0)):
        for rate in (1e-3, 2e-3, 4e-3):
            folder = tmp_path / "sweep" / f"decoder_only-s1_seed1_lr{rate!r}"
            folder.mkdir(parents=True, exist_ok=True)
            loss = 2.0 if rate == best else 2.5
            (folder / "points.csv").write_text(
                "arch,size,seed,n_params,tokens,flops,loss,lr,steps,kind,cooldown\n"
                f"decoder_only,s1,1,1,1,1,{loss},{rate!r},{end},tune,{s.cooldown}\n"
            )
        with monkeypatch.context() as m:
            if code_want == 2:
                m.setattr(plan_timing, "measure", lambda *a, **k: pytest.fail("the plan timed a job it refuses"))
            job = [("decoder_only", scaling_job(tmp_path, "decoder_only", *tuned))]
            code, _, err = plan_jobs(tmp_path, m, capsys, job, dry_run=True)
        assert code == code_want, err
        errs.append(err)
    assert "best tuning rate 0.004 is an edge of scaling.sizes.s1.lr_grid (0.001, 0.002, 0.004)" in errs[0]
    assert "add 0.008 to the grid" in errs[0] and "edge" not in errs[1]


def test_the_plan_refuses_a_folder_holding_a_cell_of_another_design(tmp_path, monkeypatch, capsys):
    """A cell folder written with weight decay 0.1 (the default): a rerun with 0.05, or with model.norm_first=true,
    exits 2 in the plan naming the key, before anything is timed; the same settings are accepted."""
    import zoo.run.plan_timing as plan_timing
    from zoo.run.job import checked_config
    from zoo.run.scaling_identity import check_same_design, design

    folder = tmp_path / "sweep" / "decoder_only-s1_seed1"
    folder.mkdir(parents=True)
    check_same_design(folder, design(checked_config(scaling_job(tmp_path))[0], "decoder_only"))
    for override, key in (
        ("task.optimizer.weight_decay=0.05", "task.optimizer.weight_decay: 0.1 there, 0.05 now"),
        ("model.norm_first=true", "model.norm_first: False there, True now"),
    ):
        with monkeypatch.context() as m:
            m.setattr(plan_timing, "measure", lambda *a, **k: pytest.fail("the plan timed a job it should refuse"))
            code, _, err = plan_jobs(
                tmp_path, m, capsys, [("decoder_only", scaling_job(tmp_path, "decoder_only", override))]
            )
        assert code == 2 and f"holds a scaling cell of another design ({key})" in err, err
    code, out, _ = plan_jobs(tmp_path, monkeypatch, capsys, [("decoder_only", scaling_job(tmp_path))], dry_run=True)
    assert code == 0


def multirun_config(overrides: list[str]):
    """The config Hydra hands a multirun's callbacks for `python -m zoo -m <overrides>` (its sweeps not applied)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        hydra = GlobalHydra.instance().hydra
        return hydra.compose_config("config", overrides, run_mode=RunMode.MULTIRUN, with_log_configuration=False)


@pytest.mark.parametrize(
    "override, message",
    [
        ("scaling.cooldown=1.5", "scaling.cooldown=1.5 must be in (0, 1): the share of each budget's steps"),
        ("scaling.warmup_tokens_per_param=-1", "scaling.warmup_tokens_per_param=-1 must be a number >= 0"),
        ("scaling.budgets=[5,0]", "scaling.budgets=[5, 0] must be a list of positive tokens-per-parameter budgets"),
        ("scaling.trunk_tokens_per_param=10", "scaling.trunk_tokens_per_param=10 ends the trunk before the cool-down"),
        ("scaling.checkpoint_every=-1", "scaling.checkpoint_every=-1 must be a whole number of steps >= 0"),
        ("scaling.cooldown_shape=square", "scaling.cooldown_shape='square' is not a cool-down shape"),
        ("scaling.tuning_table=no/lr_sweep.csv", "scaling.tuning_table='no/lr_sweep.csv' is not a file"),
    ],
)
def test_study_settings_are_refused_before_the_jobs_are_composed(monkeypatch, capsys, override, message):
    """A bad study-wide setting exits 2 with its one line from the multirun's own config, without composing the
    sweep's ~300 jobs (a minute or more) first."""
    import zoo.run.sweep_callback as cb

    composed = lambda config, check_first=None: pytest.fail("the jobs were composed before the refusal")  # noqa: E731
    monkeypatch.setattr(cb, "sweep_jobs", composed)
    with pytest.raises(SystemExit) as e:
        cb.ScalingPlan().on_multirun_start(multirun_config(["experiment=scaling", override]))
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(f"zoo: error: {message}") and len(err.splitlines()) == 1, err


def test_a_measured_window_passes_the_early_check_and_not_a_jobs():
    """experiment=scaling_translation's scaling.block_size is null until each job measures it from the data: the
    study-wide check lets it pass, the job's own design check (check_design) still needs it."""
    from zoo.scaling.design import check_settings

    scaling = multirun_config(["experiment=scaling_translation"]).scaling
    assert scaling.block_size is None
    assert check_settings(scaling, measured_block=True)[1] is None
    with pytest.raises(ConfigError, match=r"scaling.block_size=None must be a positive whole number"):
        check_design(scaling)


def test_the_corpus_check_runs_when_the_first_job_has_composed_and_before_the_rest(monkeypatch):
    """ScalingPlan's corpus check (check_first) gets the first job and every size the sweep's cells name, before
    any other job composes: a corpus too small for the plan is refused in seconds, not after composing ~300 jobs."""
    import zoo.run.sweep_callback as cb

    config = multirun_config(["experiment=scaling"])
    composed = []

    def compose(config, overrides):
        composed.append(overrides)
        cell = next(o.split("=", 1)[1] for o in overrides if o.startswith("scaling.cell="))
        return OmegaConf.create({"scaling": {"cell": cell, "sizes": OmegaConf.to_container(config.scaling.sizes)}})

    def too_small(first, sizes):
        seen.append((first.scaling.cell, sizes))
        raise ConfigError("the training split has too few tokens")

    seen = []
    monkeypatch.setattr(cb, "compose_job", compose)
    with pytest.raises(ConfigError, match="too few tokens"):
        cb.sweep_jobs(config, too_small)
    assert len(cb.sweep_overrides(config)) > 100 and len(composed) == 1
    assert seen == [(seen[0][0], ["s1", "s2", "s3", "s4", "s5"])] and seen[0][0].startswith("s1_seed1")


def test_the_plan_warns_when_the_long_reach_cannot_be_checked():
    """The long reach fits the sizes of N <= N_max / 4 and needs 3 of them. experiment=scaling_depth4's sizes
    (N = 4 (12 d^2 + 13 d) at d_model 14, 28, 42, 56, 84) leave 2: s3's 86,856 is above 343,056 / 4 = 85,764. The
    record's sizes (10,120 to 348,720; s3 56,544) leave 3 and get no note."""
    from zoo.run.scaling_plan import PlanRow, reach_note

    def rows(arch, ns):
        return [PlanRow(arch, f"s{i}_seed{k}", n, n, 1, 1, 0, 1, 1.0, 1.0) for i, n in enumerate(ns, 1) for k in (1, 3)]

    depth4 = [4 * (12 * d**2 + 13 * d) for d in (14, 28, 42, 56, 84)]
    assert depth4[2] > depth4[4] / 4
    record = [10_120, 25_408, 56_544, 155_680, 348_720]
    note = reach_note(rows("decoder_only", depth4) + rows("prefix_lm", record))
    assert note is not None and "decoder_only (2: s1, s2)" in note and "prefix_lm" not in note
    assert reach_note(rows("decoder_only", record)) is None

"""experiment=scaling_translation's tuning stage meets issue 45's rule (the LM study's): every size tuned per
family, >= 3 rates at each size, >= 5 at two sizes or more, >= 2 seeds, each run at its size's middle budget."""

import pytest
from omegaconf import OmegaConf

from zoo.run.conf import CONF_DIR
from zoo.scaling.design import check_design
from zoo.scaling.grid import cells, tune_cell_names
from zoo.scaling.sizes import middle_budget, size_non_embedding

STUDY = OmegaConf.load(f"{CONF_DIR}/experiment/scaling_translation.yaml").scaling
TOKENS_PER_BATCH = 407  # the data's target tokens a batch (tests/test_scaling_translation.py)


def test_every_size_is_tuned_with_enough_rates_and_seeds():
    """6 rates at s1-s3, 4 at s4, 5 at s5, 2 seeds (101, 102: no cell repeats the tuning run that won): 27 x 2 = 54
    tuning runs a family, before the 15 cells (seeds 1-3 at every size)."""
    grids = {name: list(size.lr_grid) for name, size in STUDY.sizes.items()}
    assert all(size.lr == "tuned" for size in STUDY.sizes.values())
    assert all(len(set(g)) >= 3 for g in grids.values()) and sum(len(set(g)) >= 5 for g in grids.values()) >= 2
    assert STUDY.tune_seeds >= 2
    tune = tune_cell_names(STUDY.sizes, STUDY.tune_seeds, seed_start=STUDY.tune_seed_start)
    assert len(tune) == 2 * (6 + 6 + 6 + 4 + 5) == 54
    assert tune[:2] == ["s1_seed101_lr0.004", "s1_seed101_lr0.0057"] and tune[-1] == "s5_seed102_lr0.004"
    swept = cells(
        STUDY.sizes, STUDY.seed_size, STUDY.seeds, STUDY.check_sizes, STUDY.tune_seeds, "all", 1, STUDY.tune_seed_start
    ).split(",")
    assert len(swept) == 54 + 15 and swept[54:] == [f"s{k}_seed{s}" for k in range(1, 6) for s in (1, 2, 3)]
    check_design(OmegaConf.merge(STUDY, {"block_size": TOKENS_PER_BATCH}))


@pytest.mark.parametrize("name, budget, steps", [("s1", 100, 3_224), ("s3", 11, 1_732), ("s5", 10, 6_909)])
def test_a_tuning_run_trains_its_sizes_middle_budget(tmp_path, name, budget, steps):
    """A tuning cell runs round(b N / 407) steps at the lower middle b of its size's budgets: s1 (N 13,120) 100,
    s3 (64,080) 11, s5 (281,200) 10."""
    from zoo_run import make_cfg

    size = STUDY.sizes[name]
    assert middle_budget(size, STUDY.budgets) == budget and round(budget * size_non_embedding(size) / 407) == steps
    rate = f"{min(size.lr_grid):g}"
    cfg = make_cfg(
        tmp_path,
        [
            "experiment=scaling_translation",
            "+benchmark=scaling_translation",
            f"scaling.cell={name}_seed102_lr{rate}",
            f"scaling.block_size={TOKENS_PER_BATCH}",
        ],
        "prefix_lm",
    )
    assert (cfg.trainer.max_steps, cfg.task.optimizer.lr, cfg.seed) == (steps, float(rate), 102)

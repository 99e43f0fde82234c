"""experiment=compare: the sweep covers the 4 arch x 3 task cells once per seed, each cell composes its own
task and data, and the architectures of a task have parameter counts within 10% of each other (built with the
real data's vocabularies, as a run builds them)."""
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from zoo.model.cost import param_count
from zoo.train import CONF_DIR, FROM_DATA, check_config, model_dict
from zoo_run import make_cfg

ARCHS = ("encoder_only", "decoder_only", "encoder_decoder", "prefix_lm")  # +arch choices; prefix_lm: decoder_only
CELLS = {"classification": ("sst2", "zoo.tasks.classification.Classification"),
         "lm": ("tiny_shakespeare", "zoo.tasks.lm.LanguageModeling"),
         "translation": ("multi30k", "zoo.tasks.translation.Translation")}


@pytest.mark.parametrize("seeds, expected", [(None, "1,2,3"), (1, "1"), (5, "1,2,3,4,5")])
def test_sweep_lists_every_cell_and_seed(seeds, expected):
    extra = [] if seeds is None else [f"compare.seeds={seeds}"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["experiment=compare", *extra], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    assert list(params) == ["+arch", "+cell", "seed"]  # arch first: the cell's task / data / steps win over the arch's
    assert sorted(params["+arch"].split(",")) == sorted(ARCHS)
    assert sorted(params["+cell"].split(",")) == sorted(CELLS)
    assert params["seed"] == expected
    assert cfg.experiment_name == "compare"


@pytest.fixture(scope="module")
def model_info(tmp_path_factory):
    """model_info() of each cell's real datamodule (BPE vocabularies trained as in a run), keyed by cell."""
    infos = {}
    for cell in CELLS:
        cfg = make_cfg(tmp_path_factory.mktemp(cell), ["experiment=compare", f"+cell={cell}"], arch="decoder_only")
        dm = instantiate(cfg.data)
        dm.prepare_data()
        dm.setup()
        infos[cell] = dm.model_info()
    return infos


@pytest.mark.parametrize("cell", list(CELLS))
def test_parameters_match_within_ten_percent(cell, model_info, tmp_path):
    """Each cell composes its task and data whatever the arch's natural ones are; the built models of a
    task's three architectures have parameter counts within 10% of the largest."""
    data, task_target = CELLS[cell]
    info = model_info[cell]
    params = {}
    for arch in ARCHS:
        cfg = make_cfg(tmp_path / arch, ["experiment=compare", f"+cell={cell}"], arch=arch)
        assert cfg.task._target_ == task_target and cfg.data._target_.endswith(
            {"sst2": "SST2", "tiny_shakespeare": "TinyShakespeare", "multi30k": "Multi30k"}[data])
        assert cfg.experiment_name == "compare"
        check_config(cfg)  # every cell is a valid run (the task trains this arch)
        model = model_dict(cfg)
        model.update({k: info[k] for k in FROM_DATA if k in info})
        task = instantiate(cfg.task, arch=cfg.arch, model=model, tokenizer=info["tokenizer"], _convert_="all")
        params[arch] = param_count(task.model)
    spread = (max(params.values()) - min(params.values())) / max(params.values())
    assert spread <= 0.10, f"{cell}: parameter counts {params} differ by {spread:.1%} (> 10%)"


def test_cells_set_their_budgets():
    """The cell's training budget overrides the arch's (encoder_only's natural two epochs): steps alone."""
    steps = {}
    for cell in CELLS:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose("config", overrides=["experiment=compare", "+arch=encoder_only", f"+cell={cell}"])
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            alone = compose("config", overrides=[f"+cell={cell}"])
        steps[cell] = cfg.trainer.max_steps
        assert cfg.trainer.max_steps == alone.trainer.max_steps > 0 and cfg.trainer.max_epochs == -1
        assert cfg.trainer.val_check_interval == alone.trainer.val_check_interval < cfg.trainer.max_steps
    assert len(steps) == 3

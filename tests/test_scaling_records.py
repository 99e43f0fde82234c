"""The LM study's two committed records and the presets that rerun them: experiment=scaling_long (RoPE,
experiments/scaling) and experiment=scaling_sinusoidal (experiments/scaling/sinusoidal). Each preset's sweep is
checked against the record's own files: the rates its tuning runs trained (lr_sweep.csv), the seeds and sizes of
its cells (points.csv)."""

import csv
from pathlib import Path

import pytest

from zoo.run.conf import CONF_DIR
from zoo.scaling.grid import cell_is_check, cell_lr, cell_seed, cell_size

ROOT = Path(__file__).resolve().parents[1]
SCALING = ROOT / "experiments" / "scaling"
RECORDS = {"scaling_long": SCALING, "scaling_sinusoidal": SCALING / "sinusoidal"}
FAMILIES = ("decoder_only", "prefix_lm", "encoder_decoder")  # the three families both records ran


def compose(preset: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", [f"experiment={preset}", "+arch=decoder_only"], return_hydra_config=True)


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["arch"] in FAMILIES]


def swept(cfg) -> tuple[set, set]:
    """The preset's own sweep (hydra.sweeper.params, resolved), read by zoo.scaling.grid: its tuning runs
    {(size, lr, seed)} and its study cells {(size, seed)}, the cool-down check's cosine cells left out (neither
    record ran them: scaling.check_sizes=[])."""
    names = [n for n in str(cfg.hydra.sweeper.params["scaling.cell"]).split(",") if not cell_is_check(n)]
    tune = {(cell_size(n), cell_lr(n), cell_seed(n)) for n in names if cell_lr(n) is not None}
    return tune, {(cell_size(n), cell_seed(n)) for n in names if cell_lr(n) is None}


@pytest.mark.parametrize("preset", sorted(RECORDS))
def test_each_preset_tunes_on_the_rates_its_record_swept(preset):
    """Per family, the (size, rate, seed) of the record's lr_sweep.csv are the preset's tuning runs."""
    tune, _ = swept(compose(preset))
    for arch in FAMILIES:
        held = {
            (r["size"], float(r["lr"]), int(r["seed"]))
            for r in rows(RECORDS[preset] / "lr_sweep.csv")
            if r["arch"] == arch
        }
        assert held == tune, arch


@pytest.mark.parametrize("preset", sorted(RECORDS))
def test_each_preset_runs_the_cells_its_record_holds(preset):
    """Per family, the (size, seed) of the record's points.csv are the preset's study cells (8 seeds at s1-s3, 5 at
    s4 and s5, from seed_start), and the positions are the record's (rope; sinusoidal)."""
    cfg = compose(preset)
    _, cells = swept(cfg)
    for arch in FAMILIES:
        held = {(r["size"], int(r["seed"])) for r in rows(RECORDS[preset] / "points.csv") if r["arch"] == arch}
        assert held == cells, arch
    assert cfg.model.position == {"scaling_long": "rope", "scaling_sinusoidal": "sinusoidal"}[preset]


def test_the_two_presets_differ_in_the_record_settings_alone():
    """scaling_sinusoidal is scaling_long with the positions, the first seed, s3's and s5's grids and its folder
    changed, nothing else: the two records differ in those settings only."""
    from omegaconf import OmegaConf

    def flat(preset):
        cfg = compose(preset)
        out = {}

        def walk(node, key):
            if isinstance(node, dict):
                for k, v in node.items():
                    walk(v, f"{key}.{k}" if key else k)
            else:
                out[key] = node

        walk(OmegaConf.to_container(cfg, resolve=False), "")
        return out

    rope, sin = flat("scaling_long"), flat("scaling_sinusoidal")
    differ = {k for k in rope.keys() | sin.keys() if rope.get(k) != sin.get(k)}
    expected = {"model.position", "scaling.seed_start", "scaling.sizes.s3.lr_grid", "scaling.sizes.s5.lr_grid"}
    assert {k for k in differ if not k.startswith("hydra.")} == expected
    derived = ("hydra.runtime", "hydra.overrides", "hydra.job.override_dirname")  # from the command, not the preset
    hydra = {k for k in differ if k.startswith("hydra.") and not k.startswith(derived)}
    assert hydra == {"hydra.sweep.dir"}

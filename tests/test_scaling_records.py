"""The LM study's two committed records and the presets that rerun them: experiment=scaling_long (RoPE,
experiments/scaling) and experiment=scaling_sinusoidal (experiments/scaling/sinusoidal). Each preset's sweep is
checked against the record's own files: the rates its tuning runs trained (lr_sweep.csv), the seeds and sizes of
its cells (points.csv)."""

import csv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = str(ROOT / "conf")
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


@pytest.mark.parametrize("preset", sorted(RECORDS))
def test_each_preset_tunes_on_the_rates_its_record_swept(preset):
    """Per family and size, the rates in the record's lr_sweep.csv are the preset's lr_grid, each at the seeds
    from tune_seed_start (2 seeds)."""
    s = compose(preset).scaling
    swept = {}
    for r in rows(RECORDS[preset] / "lr_sweep.csv"):
        swept.setdefault((r["arch"], r["size"]), set()).add((float(r["lr"]), int(r["seed"])))
    for arch in FAMILIES:
        for size, spec in s.sizes.items():
            seeds = range(s.tune_seed_start, s.tune_seed_start + s.tune_seeds)
            assert swept[(arch, size)] == {(lr, seed) for lr in spec.lr_grid for seed in seeds}, (arch, size)


@pytest.mark.parametrize("preset", sorted(RECORDS))
def test_each_preset_runs_the_cells_its_record_holds(preset):
    """Per family and size, the seeds of the record's points.csv are seed_start .. seed_start + seeds - 1 (8 at
    s1-s3, 5 at s4 and s5), and the positions are the record's (rope; sinusoidal)."""
    cfg = compose(preset)
    s = cfg.scaling
    held = {}
    for r in rows(RECORDS[preset] / "points.csv"):
        held.setdefault((r["arch"], r["size"]), set()).add(int(r["seed"]))
    for arch in FAMILIES:
        for size, spec in s.sizes.items():
            seeds = spec.seeds if spec.seeds is not None else (s.seeds if size == s.seed_size else 1)
            assert held[(arch, size)] == set(range(s.seed_start, s.seed_start + seeds)), (arch, size)
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

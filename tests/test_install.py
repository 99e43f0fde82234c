"""A non-editable install (a wheel) carries the Hydra configs as zoo/conf and finds them from anywhere."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from zoo_run import REPO

from zoo.run.conf import CONF_DIR

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `pip wheel .` builds, from a copy of the repo's top-level files, zoo/ and conf/ (setuptools
    keeps a build/ folder in the source tree, whose stale files would reach later wheels)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for p in REPO.iterdir():
        if p.is_file():
            shutil.copy2(p, src / p.name)
    for name in ("zoo", "conf"):
        shutil.copytree(REPO / name, src / name, ignore=IGNORE)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp / "dist")],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = (tmp / "dist").glob("zoo-*.whl")
    return whl


@pytest.mark.e2e
def test_wheel_has_every_config_and_module(wheel):
    """Every conf/**/*.yaml (conf/hydra/launcher/ too) is in the wheel as zoo/conf/..., and so is every
    zoo/**/*.py (pyproject.toml lists the packages by name), and the trace figure's font with its licence."""
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "conf").rglob("*.yaml"))
    assert "conf/hydra/launcher/slurm.yaml" in configs and len(configs) > 30
    assert [c for c in configs if f"zoo/{c}" not in names] == []
    modules = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "zoo").rglob("*.py"))
    assert "zoo/run/train.py" in modules
    assert [m for m in modules if m not in names] == []
    assert {"zoo/trace/fonts/ZooTraceCJK-Regular.otf", "zoo/trace/fonts/OFL.txt"} <= names  # the trace figure's
    assert not [n for n in names if n.startswith("conf/")]  # no top-level conf package


@pytest.mark.e2e
def test_wheel_finds_its_configs_outside_the_repo(wheel, tmp_path):
    """The unpacked wheel, first on the path, run from a folder outside the repo: `python -m zoo
    +arch=decoder_only --cfg all` composes from the wheel's zoo/conf, the job config included."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "WANDB_MODE": "offline"}
    r = subprocess.run(
        [sys.executable, "-m", "zoo", "+arch=decoder_only", "--cfg", "all"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    cfg = yaml.safe_load(r.stdout)
    sources = {s["provider"]: s["path"] for s in cfg["hydra"]["runtime"]["config_sources"]}
    assert sources["main"] == str(site / "zoo" / "conf")
    assert cfg["arch"] == "decoder_only" and cfg["hydra"]["runtime"]["choices"]["data"] == "tiny_shakespeare"
    assert cfg["data"]["_target_"].startswith("zoo.data.")


def test_the_repo_checkout_reads_the_repo_conf():
    """Under an editable install (these tests) CONF_DIR is the repo's conf/, which an edit there changes."""
    assert Path(CONF_DIR) == REPO / "conf"


def test_pyproject_lists_every_package():
    """pyproject.toml lists its packages by name (setuptools would miss a folder it does not list, and the
    wheel would lack its modules): every folder under zoo/ with an __init__.py is listed, and every listed
    package is such a folder or one mapped in package-dir (zoo.conf)."""
    import tomllib

    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "zoo").rglob("__init__.py")}
    assert "zoo.model" in found and "zoo.training.callbacks" in found  # the walk reaches nested packages
    assert sorted(found - listed) == []
    assert sorted(listed - found - set(setuptools.get("package-dir", {}))) == []

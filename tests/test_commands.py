"""Every `python -m zoo...` command the manual (README.md, docs/) names answers `--help`.

The commands are found in the text, so a command added to or renamed in the docs is checked without editing
this file. They start in parallel (one process each, all at once), since most of their time is imports.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# a module name is lowercase, so `python -m zoo.X` (a placeholder) is no command; a sentence's full stop may follow
COMMAND = re.compile(r"python -m (zoo(?:\.[a-z_][a-z0-9_]*)*)\b(?!\.\w)")
CONF_GROUPS = sorted(p.name for p in (ROOT / "conf").iterdir() if p.is_dir() and p.name != "hydra")


def documented_modules() -> list[str]:
    """The modules of every `python -m zoo[.X]` in README.md and docs/**/*.md, each once, sorted."""
    return sorted({m.group(1) for page in PAGES for m in COMMAND.finditer(page.read_text(encoding="utf-8"))})


MODULES = documented_modules()
# commands whose --help is known to fail, with why; strict: the test fails once one is fixed, so the entry goes
BROKEN = {}  # module -> why its --help fails (a strict xfail: fixing it fails the test until the entry goes)


@pytest.fixture(scope="module")
def helps(tmp_path_factory):
    """{module: (exit status, stdout + stderr)} of `python -m <module> --help`, run outside the repo."""
    cwd = tmp_path_factory.mktemp("help")  # Hydra's --help writes nothing, but a command must not need the repo
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONWARNINGS": "ignore"}
    procs = {
        m: subprocess.Popen(
            [sys.executable, "-m", m, "--help"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for m in MODULES
    }
    out = {}
    for m, p in procs.items():
        text, _ = p.communicate(timeout=300)
        out[m] = (p.returncode, text)
    return out


def test_the_docs_name_the_commands():
    # the regex finds the commands the README's tour shows; a broken regex would check nothing
    assert {"zoo", "zoo.report", "zoo.generate", "zoo.translate", "zoo.convert", "zoo.scaling"} <= set(MODULES)
    assert COMMAND.findall("`python -m zoo.X`, python -m zoo.report DIR, python -m zoo.bench.") == [
        "zoo.report",
        "zoo.bench",
    ]  # zoo.X: a placeholder; the full stop: the sentence's
    assert set(BROKEN) <= set(MODULES)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "module",
    [pytest.param(m, marks=pytest.mark.xfail(reason=BROKEN[m], strict=True)) for m in MODULES if m in BROKEN]
    + [m for m in MODULES if m not in BROKEN],
)
def test_help_exits_0_and_describes_the_command(module, helps):
    rc, text = helps[module]
    assert rc == 0, f"python -m {module} --help exited {rc}:\n{text[-2000:]}"
    assert text.strip(), f"python -m {module} --help printed nothing"
    if module == "zoo":  # Hydra's help: the config groups, as README says
        for group in CONF_GROUPS:
            assert f"\n{group}: " in text, group
    else:  # argparse: the usage line names the command as the docs do
        assert f"usage: python -m {module}" in text, text[:500]

"""The manual (docs/, mkdocs.yml): the generated config reference and the site's structure.

No torch: docs/gen_config_ref.py needs only PyYAML. `mkdocs build --strict` (.ci/run) checks the links.
"""

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CONF = ROOT / "conf"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_config_ref", DOCS / "gen_config_ref.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _gen()


@pytest.fixture(scope="module")
def page():
    return gen.render()


def _rows(page, section):
    """{(option, key): (default, comment)} of the table under `## section`."""
    start = page.index(f"## {section}\n")
    end = page.find("\n## ", start + 1)
    rows = {}
    for line in page[start : end if end > 0 else None].splitlines():
        m = re.match(r"^\| `([^`]+)` \| `([^`]+)` \| (.*?) \| (.*) \|$", line)
        if m:
            rows[(m.group(1), m.group(2))] = (m.group(3), m.group(4))
    return rows


def _nav_pages(nav):
    for item in nav:
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for value in item.values():
                yield from ([value] if isinstance(value, str) else _nav_pages(value))


def test_top_level_seed_has_its_default_and_comment(page):
    rows = _rows(page, "Top level: `config.yaml`")
    assert rows[("config", "seed")] == ("`1337`", "seeds torch, numpy, python and dataloader workers")
    assert rows[("config", "budget.kind")][0] == "`steps`"
    assert rows[("config", "ckpt_path")][0] == "`null`"


def test_every_group_of_conf_has_a_section(page):
    group_dirs = sorted({p.parent.relative_to(CONF).as_posix() for p in CONF.rglob("*.yaml")} - {"."})
    assert len(group_dirs) >= 10
    for group in group_dirs:
        assert f"\n## `{group}`\n" in page, group
        section = page[page.index(f"\n## `{group}`\n") :]
        listed = section[: section.index("\n\n", section.index("Options: "))]
        for option in sorted(p.stem for p in (CONF / group).glob("*.yaml")):
            assert f"`{option}`" in listed, (group, option)
    # every top-level folder (conf/hydra holds only hydra/launcher) is covered
    for folder in (p for p in CONF.iterdir() if p.is_dir()):
        assert f"\n## `{folder.name}" in page, folder.name


def test_keys_carry_their_package(page):
    model = _rows(page, "`model`")
    assert model[("tiny", "model.d_model")][0] == "`128`"
    assert model[("base", "model.d_model")][0] == "`512`"
    assert model[("tiny", "model.loss_chunk_size")][1].startswith("fused chunked head + cross-entropy")
    # `# @package _global_`: the key as written; `# @package hydra.launcher`: under that prefix
    assert _rows(page, "`arch`")[("prefix_lm", "model.mask")][0] == "`prefix`"
    assert _rows(page, "`hydra/launcher`")[("slurm", "hydra.launcher.mem_gb")][0] == "`64`"
    assert _rows(page, "`trainer`")[("fsdp", "trainer.strategy.sharding_strategy")][0] == "`FULL_SHARD`"


def test_cells_escape_markdown_but_keep_code():
    assert gen._cell("steps | tokens <sweep dir> a_b `x|y_z`") == "steps \\| tokens &lt;sweep dir&gt; a\\_b `x|y_z`"
    assert gen._trailing_comment("pattern: '(?P<l>#x)'   # named groups") == "named groups"
    assert gen._trailing_comment("url: http://a/#frag") == ""


def test_committed_reference_is_a_fresh_generation(page):
    """docs/reference/config.md as committed is, byte for byte, what docs/gen_config_ref.py makes of conf/ now:
    a change to conf/ comes with the regenerated page (`python docs/gen_config_ref.py`). mkdocs builds serve a
    fresh page without rewriting the file (its hook on_page_read_source), so CI's docs build cannot hide a
    stale copy from this test."""
    committed = (DOCS / "reference" / "config.md").read_text(encoding="utf-8")
    assert committed == page, "docs/reference/config.md is out of date: run python docs/gen_config_ref.py"


def test_docs_build_serves_the_page_fresh_and_leaves_the_file_alone(monkeypatch):
    """The mkdocs hooks render reference/config.md from conf/ for the site and write no file (a build that
    rewrote the committed copy would hide a stale one from the test above); other pages are read as written."""
    writes = []
    monkeypatch.setattr(gen, "write", lambda *a, **k: writes.append(a))
    for hook in ("on_pre_build", "on_config", "on_startup"):
        if hasattr(gen, hook):
            getattr(gen, hook)({})
    page = SimpleNamespace(file=SimpleNamespace(src_uri="reference/config.md"))
    assert gen.on_page_read_source(page, {}) == gen.render(CONF)
    assert gen.on_page_read_source(SimpleNamespace(file=SimpleNamespace(src_uri="walkthrough.md")), {}) is None
    assert writes == []


def test_nav_lists_every_page_and_every_page_exists():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs" and config["strict"] is True
    assert "docs/gen_config_ref.py" in config["hooks"]
    nav = list(_nav_pages(config["nav"]))
    for rel in nav:
        assert (DOCS / rel).is_file(), rel
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert on_disk == set(nav), on_disk ^ set(nav)


def test_readme_links_resolve_and_keep_the_ci_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs|experiments)/[^)#]+)", readme)
    assert any(link.startswith("docs/") for link in links) and any(link.startswith("experiments/") for link in links)
    for link in links:
        assert (ROOT / link).exists(), link
    # .ci/run runs README's test command
    assert "```bash\npython -m pytest -q\n```" in readme
    assert "python -m pytest -q" in (ROOT / ".ci" / "run").read_text()
    assert "mkdocs build --strict" in (ROOT / ".ci" / "run").read_text()


def _section(text: str, heading: str) -> str:
    """The text under `heading` (a whole line) up to the next heading of the same or a higher level."""
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    level = heading.split(" ", 1)[0]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", text[start:], re.M)]
    return text[start : start + ends[0]] if ends else text[start:]


def test_readme_layout_maps_every_folder():
    block = _section((ROOT / "README.md").read_text(encoding="utf-8"), "## Layout").split("```")[1]
    named = set(re.findall(r"(?:^|[\s,(])([\w.]+)/", block))
    folders = {"zoo", "conf", "experiments", "tests", "docs", ".ci"}
    assert folders <= named, folders - named
    for top in ("zoo", "experiments", "docs"):  # every folder below them, by its own name
        for d in (ROOT / top).rglob("*"):
            if d.is_dir() and d.name != "__pycache__":
                assert d.name in named, d.relative_to(ROOT)
    listed = set(re.findall(r"[\w/]+", block[block.index("conf/") :]))
    for group in {p.parent.relative_to(CONF).as_posix() for p in CONF.rglob("*.yaml")} - {"."}:
        assert group in listed, group


def _importlinter_layers() -> list[set[str]]:
    import configparser

    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    lines = [line.strip() for line in parser["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]
    return [{p.strip() for p in line.split("|")} for line in lines]


def test_import_layers_section_matches_importlinter():
    section = _section((DOCS / "architectures.md").read_text(encoding="utf-8"), "## Import layers")
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`zoo" in line]
    documented = []
    for row in rows:
        packages = re.findall(r"`(zoo(?:\.\w+)*)`", row.split(" | ")[1])
        documented.append({p for p in packages if not any(p.startswith(q + ".") for q in packages)})
    assert documented == _importlinter_layers()
    assert ".importlinter" in section and "lint-imports" in section
    assert "lint-imports" in (ROOT / ".ci" / "run").read_text()


def test_the_scaling_row_names_every_module_of_zoo_scaling():
    section = _section((DOCS / "architectures.md").read_text(encoding="utf-8"), "## Import layers")
    row = next(line for line in section.splitlines() if line.startswith("| scaling laws |"))
    named = set(re.findall(r"`(\w+)`", row.split(" | ")[2]))
    modules = {p.stem for p in (ROOT / "zoo" / "scaling").glob("*.py")} - {"__init__", "__main__"}
    assert modules <= named, sorted(modules - named)


def test_adding_an_objective_shows_the_real_module_and_real_names():
    import ast

    section = _section((DOCS / "architectures.md").read_text(encoding="utf-8"), "## Adding an objective")
    objectives = ROOT / "zoo" / "tasks" / "objectives"
    # the worked example is the module itself, as it is now
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    module = re.search(r"`(\w+\.py)`, is the whole recipe", section).group(1)
    assert example == (objectives / module).read_text(encoding="utf-8")
    # every attribute and method the steps name is one of the objective base classes'
    base = ast.parse((objectives / "base.py").read_text(encoding="utf-8"))
    members = {}
    for cls in (n for n in base.body if isinstance(n, ast.ClassDef)):
        for node in cls.body:
            names = (
                [t.id for t in node.targets if isinstance(t, ast.Name)]
                if isinstance(node, ast.Assign)
                else [node.target.id]
                if isinstance(node, ast.AnnAssign)
                else [node.name]
                if isinstance(node, ast.FunctionDef)
                else []
            )
            members.update({n: cls.name for n in names})
    steps = section[section.index("```", section.index("```python") + 3) :]
    named = set(re.findall(r"`([A-Za-z_]+)(?: = [^`]+)?`", steps))  # `NAME` or `NAME = value`
    for name in ("Objective", "LMObjective", "TranslationObjective"):
        assert name in named and any(isinstance(n, ast.ClassDef) and n.name == name for n in base.body), name
    for name in ("NAME", "ARCH", "MASKS", "METRICS", "SOURCE", "ONE_VOCABULARY", "SAMPLES", "losses", "loss"):
        assert name in named and name in members, name
    for name in ("translate", "eval_loss", "batch_flops", "model_fields", "task_fields", "check_options", "head_loss"):
        assert name in named and name in members, name
    # registered in OBJECTIVES, found by objective_class, which config_checks and model_config use
    init = (objectives / "__init__.py").read_text(encoding="utf-8")
    assert "OBJECTIVES = {" in init and "def objective_class(" in init and "def arch_rules(" in init
    assert "`OBJECTIVES`" in section and "`zoo.tasks.objectives.objective_class`" in section

"""Write docs/reference/config.md from conf/: every group, option, key, default and comment.

    python docs/gen_config_ref.py            # writes docs/reference/config.md
    python docs/gen_config_ref.py --check    # exit 1 if the committed page is out of date

mkdocs builds the page fresh from conf/ (``hooks:`` in mkdocs.yml calls ``on_page_read_source``), so the site
always describes the configs of the checkout being built, and the build leaves the committed file alone:
tests/test_docs.py checks that the committed copy equals a fresh generation. It needs only the standard
library and PyYAML.

For each ``conf/<group>/<option>.yaml`` (``conf/hydra/launcher/slurm.yaml`` is group ``hydra/launcher``)
the page lists one row per leaf key: the dotted key as it is overridden on the command line (the file's
``# @package`` header decides the prefix: ``_global_`` means none, otherwise the group's own name), its
default as written in the file, and the ``# comment`` at the end of that line. ``conf/config.yaml`` is the
top-level section. The same hook also puts ``experiments/*.md`` and their figures into the site
(``on_files``), so the manual links to the measured numbers without copying them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
OUT = ROOT / "docs" / "reference" / "config.md"
EXPERIMENTS = ROOT / "experiments"


# --- reading one yaml file -------------------------------------------------------------------------------


def _trailing_comment(line: str) -> str:
    """The `# comment` at the end of a YAML line ('' if none), ignoring '#' inside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[i + 1 :].strip()
    return ""


def _header(lines: list[str]) -> tuple[str | None, str]:
    """The file's `# @package` value (None if absent) and its leading comment block as one paragraph."""
    package, text = None, []
    for line in lines:
        s = line.strip()
        if not s.startswith("#"):
            break
        raw = s[1:]
        body = raw.strip()
        if body.startswith("@package"):
            package = body.split(None, 1)[1].strip() if len(body.split()) > 1 else ""
        elif raw.startswith("   ") and body:  # an indented example command: code, without its own comment
            command = body.split("  #")[0].strip()
            if text and text[-1].endswith(" \\`"):  # the previous line continues here
                text[-1] = text[-1][:-3] + " " + command + "`"
            else:
                text.append(f"`{command}`")
            if command.endswith("\\"):
                text[-1] = text[-1][:-2].rstrip() + " \\`"
        else:
            text.append(body)
    return package, " ".join(t for t in text if t)


def _flow(node: yaml.Node) -> str:
    """A node in YAML flow style, scalars as written: [_self_, {model: tiny}, ...]."""
    if isinstance(node, yaml.ScalarNode):
        if node.style in ("'", '"'):
            return node.style + node.value + node.style
        return node.value if node.value != "" else "null"
    if isinstance(node, yaml.SequenceNode):
        return "[" + ", ".join(_flow(item) for item in node.value) + "]"
    return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in node.value) + "}"


def _value_text(node: yaml.Node, src: str) -> str:
    """A leaf's default as written when it fits on its line, else in flow style."""
    if not isinstance(node, yaml.ScalarNode):
        text = src[node.start_mark.index : node.end_mark.index]
        if "\n" not in text:
            return text.strip()
    return _flow(node)


def _leaves(node: yaml.MappingNode, src: str, lines: list[str], prefix: str):
    """(dotted key, default, comment) for every leaf below a block mapping node."""
    for key_node, value_node in node.value:
        key = key_node.value
        dotted = f"{prefix}.{key}" if prefix else key
        if key == "defaults" and not prefix:
            dotted = "defaults"
        if isinstance(value_node, yaml.MappingNode) and not value_node.flow_style and value_node.value:
            comment = _trailing_comment(lines[key_node.start_mark.line])
            if comment:  # a comment on the parent line ("budget:   # what bounds training") is a row too
                yield dotted, "", comment
            yield from _leaves(value_node, src, lines, dotted)
        else:
            line = lines[key_node.start_mark.line]
            yield dotted, _value_text(value_node, src), _trailing_comment(line)


def read_option(path: Path, group: str | None) -> dict:
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    package, about = _header(lines)
    if package is None:
        package = group.replace("/", ".") if group else ""
    prefix = "" if package in ("_global_", "") else package
    root = yaml.compose(src)
    rows = list(_leaves(root, src, lines, prefix)) if isinstance(root, yaml.MappingNode) else []
    return {"option": path.stem, "package": package or "_global_", "about": about, "rows": rows}


def groups(conf: Path = CONF) -> dict[str, list[Path]]:
    """{group: [option files]}, groups as Hydra names them (folders below conf/, '/'-separated)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(conf.rglob("*.yaml")):
        rel = path.parent.relative_to(conf)
        if rel == Path("."):
            continue
        found.setdefault(rel.as_posix(), []).append(path)
    return found


# --- Markdown --------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text for a Markdown table cell: code spans kept, pipes and HTML-looking brackets escaped."""

    def plain(part: str) -> str:
        return (
            part.replace("\\", "\\\\")
            .replace("|", "\\|")
            .replace("<", "&lt;")
            .replace(">", "&gt;")
            .replace("*", "\\*")
            .replace("_", "\\_")
        )

    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: no code spans at all
        return plain(text).replace("`", "\\`")
    return "".join(plain(p) if i % 2 == 0 else "`" + p + "`" for i, p in enumerate(parts))


def _code(text: str) -> str:
    if text == "":
        return ""
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"  # Python-Markdown's tables do not split at a pipe in a code span


def _table(options: list[dict]) -> list[str]:
    out = ["| option | key | default | comment |", "|---|---|---|---|"]
    for opt in options:
        for key, default, comment in opt["rows"]:
            out.append(f"| `{opt['option']}` | `{key}` | {_code(default)} | {_cell(comment)} |")
    return out


def render(conf: Path = CONF) -> str:
    out = [
        "# Config reference",
        "",
        "<!-- Generated from conf/ by `python docs/gen_config_ref.py` (tests/test_docs.py checks it). Do not edit. -->",
        "",
        "Every group of `conf/`, every option of it and every key the option sets, with its default and the",
        "comment on its line of the YAML. Pick an option with `group=option` (`+arch=...`, `+benchmark=...`",
        "for the groups without a default), override a key with `key=value`. The key column is the dotted name",
        "you override: options marked `_global_` set keys anywhere in the config.",
        "",
        "## Top level: `config.yaml`",
        "",
    ]
    top = read_option(conf / "config.yaml", None)
    if top["about"]:
        out += [top["about"], ""]
    out += _table([top]) + [""]
    for group, paths in groups(conf).items():
        options = [read_option(p, group) for p in paths]
        out += [f"## `{group}`", ""]
        out += [f"Options: {', '.join('`' + o['option'] + '`' for o in options)}.", ""]
        for o in options:
            pkg = " (package `_global_`)" if o["package"] == "_global_" else ""
            about = f": {_cell(o['about'])}" if o["about"] else ""
            out.append(f"- **`{o['option']}`**{pkg}{about}")
        out += [""] + _table(options) + [""]
    return "\n".join(out)


def write(path: Path = OUT, conf: Path = CONF) -> bool:
    """Write the page; True if its content changed (an unchanged file is left alone for mkdocs serve)."""
    text = render(conf)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


# --- mkdocs hooks ----------------------------------------------------------------------------------------


def on_page_read_source(page, config, **kwargs):  # noqa: ARG001 - the mkdocs hook signature
    """The config reference's Markdown, rendered from conf/ (the file in docs/ is not read nor written)."""
    if page.file.src_uri == OUT.relative_to(ROOT / "docs").as_posix():
        return render()
    return None


def on_files(files, config, **kwargs):  # noqa: ARG001
    """Serve experiments/*.md and their figures at experiments/ in the site (not copied into docs/)."""
    from mkdocs.structure.files import File

    for path in sorted(EXPERIMENTS.rglob("*")):
        if path.suffix not in (".md", ".png", ".svg") or not path.is_file():
            continue
        rel = path.relative_to(ROOT).as_posix()
        if files.get_file_from_path(rel) is None:
            files.append(
                File(
                    rel, src_dir=str(ROOT), dest_dir=config["site_dir"], use_directory_urls=config["use_directory_urls"]
                )
            )
    return files


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        ok = OUT.exists() and OUT.read_text(encoding="utf-8") == render()
        print(
            "docs/reference/config.md is " + ("up to date" if ok else "out of date: run python docs/gen_config_ref.py")
        )
        sys.exit(0 if ok else 1)
    print(("wrote " if write() else "unchanged: ") + str(OUT.relative_to(ROOT)))

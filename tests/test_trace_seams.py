"""python -m zoo.trace at its edges: module files named wherever the package lies, --out refused before tracing,
the figure's Chinese labels drawn with real glyphs, and --only matching whole name parts."""

import inspect
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from zoo_run import REPO

from zoo.model.blocks.attention import MultiHeadAttention
from zoo.model.blocks.scaled_dot_product import attend
from zoo.trace.command import build, main, parser
from zoo.trace.stages import select

pytestmark = pytest.mark.usefixtures("one_thread")


# options whose stages other modules compute: pre-LN norms, RoPE, RMSNorm, a gated feed-forward network
OPTIONS = ["model.norm_first=true", "model.position=rope", "model.norm=rmsnorm", "model.activation=swiglu"]


def traced(*argv):
    return build(parser().parse_intermixed_args(list(argv)))


# a stage's code as its module line names it: 'Name[.attr] (path/to/file.py)'
CODE = re.compile(r"(\w+)(?:\.[\w, ]+)? \(([^()]+\.py)\)")


def undefined(module: str, root: Path) -> list[str]:
    """The 'Name (path)' parts of a stage's module line whose file under root does not define class / def Name."""
    bad = []
    for name, path in CODE.findall(module):
        file = root / path
        if not file.is_file() or not re.search(rf"^\s*(class|def) {name}\b", file.read_text(encoding="utf-8"), re.M):
            bad.append(f"{name} ({path})")
    return bad


@pytest.mark.e2e
def test_module_files_are_named_from_the_package_in_a_folder_named_zoo(tmp_path):
    """A clone named zoo inside a folder named zoo (tmp/zoo/zoo/zoo/model/...): the module files the trace
    prints are the walk-through's zoo/model/... (docs/walkthrough.md), not the path cut at the first folder
    named zoo; torch's modules are named as torch.nn's. In the clone the file that defines attention is moved to
    another folder (as a restructuring moves it): every file the stages print, `attend`'s included, is the one
    that defines their code there."""
    clone = tmp_path / "zoo" / "zoo"
    shutil.copytree(REPO / "zoo", clone / "zoo")  # with __pycache__: copy2 keeps the times that validate it
    shutil.copytree(REPO / "conf", clone / "conf")  # the toy model's config, composed as `python -m zoo` does
    attention = Path(inspect.getsourcefile(attend)).relative_to(REPO)  # zoo/model/blocks/attention.py, or where it lies
    moved = attention.parent / "moved_here" / attention.name
    (clone / moved).parent.mkdir()
    (clone / moved.parent / "__init__.py").write_text("", encoding="utf-8")
    os.replace(clone / attention, clone / moved)
    old = ".".join(attention.with_suffix("").parts)
    package, name = ".".join(moved.parent.parts), attention.stem
    alias = f"import sys\nfrom {package} import {name} as moved\nsys.modules[__name__] = moved\n"  # import old: moved
    (clone / attention).write_text(alias, encoding="utf-8")
    code = (
        "import zoo, torch\n"
        "from zoo.trace.source import where\n"
        "from zoo.model.blocks.embedding import Embedding\n"
        "from zoo.trace.command import build, parser\n"
        "print(zoo.__file__)\n"
        "print(where(Embedding))\n"
        "print(where(torch.nn.LayerNorm))\n"
        f"import {old}\n"
        f"print({old}.__file__)\n"
        "for arch in ('encoder_decoder', 'decoder_only', 'encoder_only'):\n"
        "    for s in build(parser().parse_intermixed_args([f'+arch={arch}']))[0].stages:\n"
        "        print(s.module)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(clone)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[:4] == [
        str(clone / "zoo" / "__init__.py"),  # the copy, not the checkout
        "Embedding (zoo/model/blocks/embedding.py)",
        "nn.LayerNorm (torch.nn)",
        str(clone / moved),
    ]
    modules = lines[4:]
    assert f"attend ({moved.as_posix()})" in modules
    mha = Path(inspect.getsourcefile(MultiHeadAttention)).relative_to(REPO)  # moved with attend if they share a file
    assert f"MultiHeadAttention.out_proj ({(moved if mha == attention else mha).as_posix()})" in modules
    assert [m for m in modules if undefined(m, clone)] == []


@pytest.mark.parametrize(
    "argv",
    [
        ["+arch=encoder_decoder"],
        ["+arch=decoder_only", *OPTIONS],
        ["+arch=decoder_only", "model.position=alibi"],
        ["+arch=encoder_decoder", "model.position=t5_relative"],
    ],
)
def test_every_stage_names_the_file_that_defines_its_code(argv):
    """Each stage's module line names its code and a file of this checkout that defines it (class or def)."""
    tr, *_ = traced(*argv)
    assert all(CODE.search(s.module) or "torch" in s.module for s in tr.stages)
    assert {s.name: undefined(s.module, REPO) for s in tr.stages if undefined(s.module, REPO)} == {}


@pytest.mark.parametrize("kind", ["file", "under a file"])
def test_out_that_is_a_file_exits_2_before_tracing(tmp_path, capsys, monkeypatch, kind):
    """--out naming an existing file (or a folder under one) exits 2 with one line naming the fix, and traces
    nothing: no model is built, nothing is printed on stdout."""
    taken = tmp_path / "taken.txt"
    taken.write_text("keep me", encoding="utf-8")
    out = taken if kind == "file" else taken / "trace"

    def no_trace(args):
        raise AssertionError("traced before checking --out")

    monkeypatch.setattr("zoo.trace.command.build", no_trace)
    assert main(["+arch=encoder_decoder", "--plain", "--out", str(out)]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.startswith(f"zoo.trace: error: --out {out}: ") and cap.err.count("\n") == 1
    assert f"{taken} is a file" in cap.err and "--out DIR" in cap.err
    assert taken.read_text(encoding="utf-8") == "keep me"


def test_figure_draws_the_chinese_target_with_real_glyphs(tmp_path, monkeypatch):
    """The figure's tick labels are the target's tokens <s> 我 爱 (no U+ code points), every character of them
    is in a font of the label's font family list (matplotlib's per-glyph fallback), and drawing the figure
    raises no "Glyph ... missing from font(s)" warning (a box drawn in place of the character)."""
    from matplotlib import font_manager, ft2font
    from matplotlib import pyplot as plt

    from zoo.trace.figure import figure

    kept = []
    monkeypatch.setattr(plt, "close", kept.append)  # figure() closes its figure after saving it: keep it
    tr, *_ = traced("+arch=encoder_decoder")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure(tr, tmp_path / "trace.png")
    assert not [str(w.message) for w in caught if "missing from font" in str(w.message)]
    (fig,) = kept
    (ax,) = [a for a in fig.axes if a.get_title().startswith("decoder.0.self_attn\n")]  # its mask panel
    labels = ax.get_yticklabels()
    assert [t.get_text() for t in labels] == ["<s>", "我", "爱"]
    for t in labels[1:]:
        families = t.get_fontproperties().get_family()
        find = font_manager.findfont
        paths = [find(font_manager.FontProperties(family=[f]), fallback_to_default=False) for f in families]
        assert any(ft2font.FT2Font(p).get_char_index(ord(t.get_text())) for p in paths), (t.get_text(), paths)
    plt.close(fig)


def test_a_character_no_font_has_is_written_as_its_code_point():
    """A character that no font has (U+10FFFD, private use) is reported and labelled by its code point; the toy
    vocabulary's characters all have a font (zoo's own for 我 爱 你), first in matplotlib's default family."""
    from zoo.trace.font import bundled_family, families, label
    from zoo.trace.inputs import TOY_VOCAB

    fonts, missing = families(["I", "我", "a\U0010fffd"])
    assert missing == {"\U0010fffd"}
    assert label("a\U0010fffd", missing) == "aU+10FFFD" and label("我", missing) == "我"
    fonts, missing = families(TOY_VOCAB)
    assert missing == set() and fonts[-1] == bundled_family() == "Zoo Trace CJK"


def test_out_notes_the_characters_no_font_has(tmp_path, capsys, monkeypatch):
    """When the figure writes a character as its code point, --out says so on stderr and names a font to install."""
    monkeypatch.setattr("zoo.trace.font.families", lambda texts: (["sans-serif"], {"我", "爱"}))
    assert main(["+arch=encoder_decoder", "--plain", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: no font on this machine has 我 爱: the figure writes U+6211 U+7231; install")
    assert err.count("\n") == 1 and "fonts-noto-cjk" in err


def test_only_a_layer_number_does_not_pick_the_layers_that_start_with_it():
    """--only decoder.1 in a model of 11 decoder layers picks layer 1's eight stages, not layer 10's."""
    tr, *_ = traced("+arch=decoder_only", "model.n_layers=11")
    assert "decoder.10.ffn" in tr.names()
    names = [s.name for s in select(tr, ["decoder.1"])]
    assert names == [
        "decoder.1.self_attn.heads",
        "decoder.1.self_attn.scores",
        "decoder.1.self_attn.weights",
        "decoder.1.self_attn.values",
        "decoder.1.self_attn.combine",
        "decoder.1.self_attn.add_norm",
        "decoder.1.ffn",
        "decoder.1.ffn.add_norm",
    ]
    assert [s.name for s in select(tr, ["decoder.1.ffn"])] == ["decoder.1.ffn", "decoder.1.ffn.add_norm"]
    with pytest.raises(ValueError, match="--only decoder.1.f: no such stage"):
        select(tr, ["decoder.1.f"])


@pytest.mark.e2e
def test_a_source_longer_than_the_lms_trained_window_is_refused(tmp_path, capsys, shared_data):
    """A Tiny Shakespeare run trains 32-token windows (data.block_size=32) in a model of 64 positions: a source of
    40 characters fits model.max_len but not what the model was trained on, and is refused before tracing in one
    line naming the length, the window and the fix; 32 characters trace."""
    from zoo_run import TINY, make_cfg

    from zoo.run.train import run

    run(make_cfg(tmp_path, [*TINY, "trainer.max_steps=1", "logger=csv", "task.sample=null"]))
    assert main([f"ckpt_path={tmp_path}", "--src", "ROMEO: " * 5 + "ROMEO"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "zoo.trace: error: --src is 40 tokens, longer than the 32-token window the checkpoint was trained on "
        "(data.block_size=32): shorten it to at most 32 tokens\n"
    )
    tr, arch, cfg, inputs, model = traced(f"ckpt_path={tmp_path}", "--src", "ROMEO: " * 4 + "ROME")
    assert inputs["seq"].shape == (1, 32) and cfg.max_len == 64


@pytest.mark.parametrize("cell", ["encoder_decoder", "decoder_only"])
def test_a_source_longer_than_the_translation_runs_sentences_is_refused(tmp_path, capsys, cell):
    """A translation run cut its sentences to data.max_len tokens, EOS included (here 8, in a model of 128
    positions): a longer source is refused before tracing, naming its length with EOS, the limit and the fix."""
    from test_translate import write_checkpoint

    from zoo.data.bpe import SubwordTokenizer
    from zoo.trace.inputs import checkpoint_model

    path = write_checkpoint(tmp_path / "toy.ckpt", cell, dm={"max_len": 8})
    src = "Zwei Männer spielen Fußball auf einer Wiese."
    tok = checkpoint_model(str(path))[3]
    n = len(tok.encode(src)) + 1
    assert isinstance(tok, SubwordTokenizer) and n > 8
    assert main([f"ckpt_path={path}", "--src", src]) == 2
    assert capsys.readouterr().err == (
        f"zoo.trace: error: --src is {n} tokens with its EOS, longer than the sentences the checkpoint was trained "
        f"on (data.max_len=8, EOS included): shorten it to at most 7 tokens\n"
    )


@pytest.mark.parametrize(
    "src, tgt, trained, message",
    [
        (5, 4, {"window": 8}, "--src + --tgt is 9 tokens, longer than the 8-token window"),
        (3, 8, {"sentence": 8}, "--tgt is 9 tokens with its start token, longer than the sentences the checkpoint"),
        (7, 0, {"sentence": 8}, None),  # 7 + EOS = 8: what the run trained on
        (8, 7, {"window": 16}, None),
        (40, 0, {}, None),  # nothing recorded: model.max_len alone bounds it (make_inputs)
    ],
)
def test_lengths_the_run_trained_on_bound_the_inputs(src, tgt, trained, message):
    from zoo.trace.window import WindowError, check_lengths

    if message is None:
        check_lengths([5] * src, [6] * tgt or None, trained)
    else:
        with pytest.raises(WindowError, match=re.escape(message)):
            check_lengths([5] * src, [6] * tgt or None, trained)

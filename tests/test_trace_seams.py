"""python -m zoo.trace at its edges: module files named wherever the package lies, --out refused before tracing,
the figure's Chinese labels drawn with real glyphs, and --only matching whole name parts."""

import os
import shutil
import subprocess
import sys
import warnings

import pytest
from zoo_run import REPO

from zoo.report.trace import select
from zoo.run.trace import build, main, parser

pytestmark = pytest.mark.usefixtures("one_thread")


def traced(*argv):
    return build(parser().parse_intermixed_args(list(argv)))


@pytest.mark.e2e
def test_module_files_are_named_from_the_package_in_a_folder_named_zoo(tmp_path):
    """A clone named zoo inside a folder named zoo (tmp/zoo/zoo/zoo/model/...): the module files the trace
    prints are the walk-through's zoo/model/... (docs/walkthrough.md), not the path cut at the first folder
    named zoo; torch's modules are named as torch.nn's."""
    clone = tmp_path / "zoo" / "zoo"
    shutil.copytree(REPO / "zoo", clone / "zoo")  # with __pycache__: copy2 keeps the times that validate it
    code = (
        "import zoo, torch\n"
        "from zoo.report.trace import where\n"
        "from zoo.model.blocks.embedding import Embedding\n"
        "from zoo.model.blocks.attention import MultiHeadAttention\n"
        "print(zoo.__file__)\n"
        "print(where(Embedding))\n"
        "print(where(MultiHeadAttention, 'out_proj'))\n"
        "print(where(torch.nn.LayerNorm))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(clone)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == [
        str(clone / "zoo" / "__init__.py"),  # the copy, not the checkout
        "Embedding (zoo/model/blocks/embedding.py)",
        "MultiHeadAttention.out_proj (zoo/model/blocks/attention.py)",
        "nn.LayerNorm (torch.nn)",
    ]


@pytest.mark.parametrize("kind", ["file", "under a file"])
def test_out_that_is_a_file_exits_2_before_tracing(tmp_path, capsys, monkeypatch, kind):
    """--out naming an existing file (or a folder under one) exits 2 with one line naming the fix, and traces
    nothing: no model is built, nothing is printed on stdout."""
    taken = tmp_path / "taken.txt"
    taken.write_text("keep me", encoding="utf-8")
    out = taken if kind == "file" else taken / "trace"

    def no_trace(args):
        raise AssertionError("traced before checking --out")

    monkeypatch.setattr("zoo.run.trace.build", no_trace)
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

    from zoo.report.trace import figure

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
    from zoo.report.trace_font import bundled_family, families, label
    from zoo.run.trace import TOY_VOCAB

    fonts, missing = families(["I", "我", "a\U0010fffd"])
    assert missing == {"\U0010fffd"}
    assert label("a\U0010fffd", missing) == "aU+10FFFD" and label("我", missing) == "我"
    fonts, missing = families(TOY_VOCAB)
    assert missing == set() and fonts[-1] == bundled_family() == "Zoo Trace CJK"


def test_out_notes_the_characters_no_font_has(tmp_path, capsys, monkeypatch):
    """When the figure writes a character as its code point, --out says so on stderr and names a font to install."""
    monkeypatch.setattr("zoo.report.trace_font.families", lambda texts: (["sans-serif"], {"我", "爱"}))
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

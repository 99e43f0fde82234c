"""Config files and the command line fail like everything else: one `zoo: error:` line, exit 2, naming the file
and line (a YAML syntax error in a config of the user's), the override and the character (an override Hydra's
grammar cannot read, such as an unquoted ~), or the folder to add to hydra.searchpath (a config of the user's
that Hydra was not told where to find), with a fix that works."""

from pathlib import Path

import pytest
from zoo_run import run_cli

from zoo.run.cli_overrides import check_overrides, typos
from zoo.run.conf import CONF_DIR


def errors(argv, capsys) -> list[str]:
    """The lines check_overrides prints before it exits with 2 (it must exit)."""
    with pytest.raises(SystemExit) as e:
        check_overrides(argv, CONF_DIR)
    assert e.value.code == 2
    return capsys.readouterr().err.strip().splitlines()


def user_config(root: Path, text: str) -> Path:
    path = root / "conf" / "data" / "my_corpus.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path, capsys):
    path = user_config(tmp_path, "defaults:\n  - text_corpus\nfile: a.txt\n  bad: 1\n")
    lines = errors(["+arch=decoder_only", "data=my_corpus", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"], capsys)
    assert len(lines) == 1 and lines[0].startswith(f"zoo: error: {path}, line 4, column 6: ")
    assert "mapping values are not allowed here" in lines[0] and "indentation" in lines[0]


def test_an_unclosed_bracket_names_where_it_opens(tmp_path, capsys):
    path = user_config(tmp_path, "defaults:\n  - text_corpus\nfile: a.txt\nlimits: [1, 2\nmax_len: 5\n")
    (line,) = errors(["+arch=decoder_only", "data=my_corpus", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"], capsys)
    assert line.startswith(f"zoo: error: {path}, line ") and "opened at line 4" in line


@pytest.mark.parametrize("multirun", [False, True])
def test_an_unquoted_tilde_is_one_line_with_a_fix_that_works(capsys, multirun):
    """data.file=~/x.txt: Hydra's lexer stops at ~; the message names the override, the character and the
    quoted form, which Hydra then reads as the path (zoo.data expands ~)."""
    argv = [*(["-m"] if multirun else []), "+arch=decoder_only", "data=text_corpus", "data.file=~/x.txt"]
    (line,) = errors(argv, capsys)
    assert line.startswith("zoo: error: data.file=~/x.txt: Hydra's override grammar cannot read `~` (character 11)")
    fix = "'data.file=\"~/x.txt\"'"
    assert fix in line
    assert typos(["+arch=decoder_only", "data=text_corpus", fix.strip("'")], CONF_DIR) == []  # the fix composes


def test_a_config_of_ones_own_without_searchpath_names_the_folder(tmp_path, capsys, monkeypatch):
    """data=my_corpus, written as conf/data/my_corpus.yaml below the working folder, without hydra.searchpath:
    the message names the file found and the exact searchpath override, which then composes; no "did you mean"
    another config."""
    user_config(tmp_path, "defaults:\n  - text_corpus\nfile: a.txt\n")
    monkeypatch.chdir(tmp_path)
    (line,) = errors(["+arch=decoder_only", "data=my_corpus"], capsys)
    fix = f"hydra.searchpath=[file://{tmp_path / 'conf'}]"
    assert line.startswith("zoo: error: data=my_corpus is not an option of data") and "did you mean" not in line
    assert str(tmp_path / "conf" / "data" / "my_corpus.yaml") in line and f"add {fix}" in line
    assert typos(["+arch=decoder_only", "data=my_corpus", fix], CONF_DIR) == []


@pytest.mark.e2e
def test_a_yaml_syntax_error_exits_2_without_a_traceback(tmp_path):
    user_config(tmp_path, "defaults:\n  - text_corpus\nfile: a.txt\n  bad: 1\n")
    out = run_cli(["+arch=decoder_only", "data=my_corpus", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [next(x for x in out.stderr.splitlines() if x.startswith("zoo: error:"))]


@pytest.mark.parametrize("multirun", [False, True])
def test_two_archs_are_one_line_with_the_sweep_that_compares_them(capsys, multirun):
    """+arch=a +arch=b: Hydra advises `override arch: b`, a defaults-list line that a command line cannot take;
    zoo names the two choices, one arch per run, and the multirun that compares them, which composes."""
    argv = [*(["-m"] if multirun else []), "+arch=decoder_only", "+arch=encoder_only"]
    (line,) = errors(argv, capsys)
    assert line == (
        "zoo: error: +arch is given twice (+arch=decoder_only +arch=encoder_only), and a run trains one "
        "architecture: keep one, or compare them in one multirun: python -m zoo -m +arch=decoder_only,encoder_only"
    )
    assert typos(["-m", "+arch=decoder_only,encoder_only"], CONF_DIR) == []  # the advice works


def test_another_group_given_twice_names_its_sweep(capsys):
    (line,) = errors(["+arch=decoder_only", "+debug=limit", "+debug=overfit"], capsys)
    assert line == (
        "zoo: error: +debug is given twice (+debug=limit +debug=overfit), and a run takes one debug option: "
        "keep one, or sweep them in one multirun: python -m zoo -m +debug=limit,overfit"
    )

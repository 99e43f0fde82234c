"""python -m zoo.translate: every architecture's translation checkpoint translates as its run's own test decoding
did (tiny runs, e2e), the decoding options reach the decoder, sentences come from argv, a file or stdin, a run
directory resolves to its checkpoint, and bad input exits with 2 and one message before any decoding."""

import io
import json

import pytest
import torch
from zoo_run import multi30k_pairs, run_cli

from zoo.data.batching import pad
from zoo.data.bpe import SubwordTokenizer, train_bpe
from zoo.run import translate as zt
from zoo.tasks.translation import Translation

pytestmark = pytest.mark.usefixtures("one_thread")

SOURCES = [
    "Ein Hund läuft durch den Schnee.",
    "Zwei Männer spielen Fußball auf einer Wiese.",
    "Eine Frau liest ein Buch.",
    "Kinder spielen im Park.",
]
TARGETS = ["A dog runs through the snow.", "Two men play soccer on a field.", "A woman reads a book.", "Kids play."]
OPTIM = {"lr": 1e-3, "betas": [0.9, 0.98], "weight_decay": 0.0, "eps": 1e-9}
SCHED = {"kind": "noam", "warmup_steps": 10, "decay_steps": None, "min_lr": 0.0, "warmup_fraction": None}
CELLS = {  # +arch (or objective) -> (arch, model overrides, task.objective)
    "encoder_decoder": ("encoder_decoder", {}, None),
    "decoder_only": ("decoder_only", {}, None),
    "prefix_lm": ("decoder_only", {"mask": "prefix"}, None),
    "encoder_ar": ("encoder_only", {}, "encoder_ar"),
    "cmlm_mask_predict": ("encoder_only", {}, "cmlm_mask_predict"),
}


# ---- checkpoints of untrained tasks, as a run saves them (the keys zoo.translate reads) --------------------
def write_checkpoint(path, cell="encoder_decoder", dm=None, seed=0, never_eos=False, **task_kw):
    """A checkpoint of an untrained tiny Translation task (untied head: its greedy output does not stop at once)
    with the keys a run's checkpoint has; never_eos: its head's EOS row scaled to give EOS the lowest logit
    everywhere (every hypothesis runs to its length limit). Returns its path."""
    arch, model_kw, objective = CELLS[cell]
    tok = SubwordTokenizer(train_bpe(SOURCES + TARGETS, 80)).state_dict()
    vocab = SubwordTokenizer.from_state_dict(tok).vocab_size
    model = dict(vocab_size=vocab, d_model=32, n_heads=2, d_ff=64, n_layers=1, dropout=0.0, max_len=128)
    model.update(tie_embeddings=False, lm_head_bias=never_eos, **model_kw)
    torch.manual_seed(seed)
    task = Translation(
        arch=arch,
        model=model,
        tokenizer={"src": tok, "tgt": tok},
        optimizer=OPTIM,
        scheduler=SCHED,
        objective=objective,
        **{"beam_size": 2, "max_len_b": 4, **task_kw},
    )
    if never_eos:
        with torch.no_grad():
            task.model.lm_head.bias[task.model.cfg.eos_id] = -1e4
    ckpt = {
        "hyper_parameters": dict(task.hparams),
        "state_dict": task.state_dict(),
        "zoo_task": "Translation",
        "datamodule_hyper_parameters": {"max_len": 40, "truncate": True, "max_tokens": 256, **(dm or {})},
        "zoo_data": {"dataset": "toy", "src_lang": "de", "tgt_lang": "en"},
    }
    torch.save(ckpt, path)
    return path


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("ckpt") / "toy.ckpt")


def run_main(capsys, *argv):
    """(exit status, stdout lines, stderr) of zoo.translate.main(argv)."""
    rc = zt.main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out.split("\n")[:-1], out.err


def task_of(path):
    """The checkpoint's task and source tokenizer, as zoo.translate loads them."""
    ckpt = torch.load(path, weights_only=True)
    return zt.load(ckpt, str(path))


# ---- decoding -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cell", list(CELLS))
def test_a_sentence_translates_as_it_does_alone(cell, tmp_path, capsys):
    """Batches hold sources of one length, so each sentence's length limit (source + max_len_b) is its own: the
    hypotheses of a mixed input equal those of each sentence translated alone. With a model that never emits EOS
    they differ from a mixed-length batch's for the archs whose limit is the batch's longest source."""
    path = write_checkpoint(tmp_path / "c.ckpt", cell, never_eos=True)
    rc, together, _ = run_main(capsys, path, *SOURCES, "--beam", "1")
    assert rc == 0 and len(together) == len(SOURCES) and any(together)
    alone = []
    for s in SOURCES:
        rc, out, _ = run_main(capsys, path, s, "--beam", "1")
        alone += out
    assert together == alone
    task, tok = task_of(path)
    rows = [tok.encode(s) + [task.model.cfg.eos_id] for s in SOURCES]
    assert len({len(r) for r in rows}) == len(rows)  # every batch below mixes lengths
    src, mask = pad(rows, task.model.cfg.pad_id)
    mixed = [task.tgt_tokenizer.decode(h) for h in task.translate({"src": src, "src_key_padding_mask": mask}, 1)]
    if cell in ("encoder_decoder", "decoder_only", "prefix_lm"):
        assert mixed != alone  # the fault a mixed batch would bring


def spy(monkeypatch):
    """Record (beam_size, length_penalty, max_len_b, early_stopping, nat_iterations) at each Translation.translate."""
    calls, original = [], Translation.translate

    def translate(self, batch, beam_size=1):
        hp = self.hparams
        calls.append((beam_size, hp.length_penalty, hp.max_len_b, hp.early_stopping, hp.nat_iterations))
        return original(self, batch, beam_size)

    monkeypatch.setattr(Translation, "translate", translate)
    return calls


def test_decoding_options_reach_the_decoder(ckpt, monkeypatch, capsys):
    calls = spy(monkeypatch)
    rc, default, err = run_main(capsys, ckpt, SOURCES[0])
    assert rc == 0 and calls == [(2, 0.6, 4, "never", 4)]  # the checkpoint's task.beam_size etc.
    assert "beam 2, lenpen 0.6" in err and "de->en" in err
    calls.clear()
    argv = ["--beam", "3", "--lenpen", "1.5", "--max-len-b", "2", "--early-stopping", "true", "--nat-iterations", "2"]
    rc, out, _ = run_main(capsys, ckpt, SOURCES[0], *argv)
    assert rc == 0 and calls == [(3, 1.5, 2, True, 2)]
    calls.clear()
    rc, greedy, err = run_main(capsys, ckpt, SOURCES[0], "--beam", "1")
    assert rc == 0 and calls[0][0] == 1 and "greedy" in err
    task, tok = task_of(ckpt)  # the task's own decode of the same row
    src = torch.tensor([tok.encode(SOURCES[0]) + [task.model.cfg.eos_id]])
    batch = {"src": src, "src_key_padding_mask": torch.zeros_like(src, dtype=torch.bool)}
    assert greedy == [task.tgt_tokenizer.decode(task.translate(batch, 1)[0])]
    assert default == [task.tgt_tokenizer.decode(task.translate(batch, 2)[0])] != greedy  # measured: they differ


def test_sentences_from_argv_a_file_and_stdin(ckpt, tmp_path, monkeypatch, capsys):
    rc, from_argv, _ = run_main(capsys, ckpt, *SOURCES, "--beam", "1")
    assert rc == 0 and len(from_argv) == len(SOURCES)
    f = tmp_path / "in.de"
    f.write_text("\r\n".join(SOURCES) + "\r\n", encoding="utf-8")  # CRLF lines read as the run read its files
    rc, from_file, _ = run_main(capsys, ckpt, "--input", f, "--beam", "1")
    assert (rc, from_file) == (0, from_argv)
    rc, intermixed, _ = run_main(capsys, ckpt, "--beam", "1", *SOURCES[:2], "--max-tokens", "64", *SOURCES[2:])
    assert (rc, intermixed) == (0, from_argv)
    for extra in ([], ["--input", "-"]):
        monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(SOURCES) + "\n"))
        rc, from_stdin, _ = run_main(capsys, ckpt, *extra, "--beam", "1")
        assert (rc, from_stdin) == (0, from_argv)
    g = tmp_path / "blank.de"  # a blank line gives a blank line: the output stays aligned with the input
    g.write_text(f"{SOURCES[0]}\n\n{SOURCES[1]}\n", encoding="utf-8")
    rc, out, _ = run_main(capsys, ckpt, "--input", g, "--beam", "1")
    assert (rc, out) == (0, [from_argv[0], "", from_argv[1]])


def test_a_long_sentence_is_cut_as_the_run_cut_its_own_or_refused(tmp_path, monkeypatch, capsys):
    path = write_checkpoint(tmp_path / "c.ckpt", dm={"max_len": 16})  # 15 source tokens, then EOS
    task, tok = task_of(path)
    long = " ".join(SOURCES)
    ids = tok.encode(long)
    assert len(tok.encode(SOURCES[2])) <= 15 < len(ids)
    rc, out, err = run_main(capsys, path, SOURCES[2], long, "--beam", "1")
    assert rc == 0 and "1 sentence(s) longer than 15 tokens are cut to 15" in err and "line 2" in err
    src = torch.tensor([ids[:15] + [task.model.cfg.eos_id]])
    cut = task.translate({"src": src, "src_key_padding_mask": torch.zeros_like(src, dtype=torch.bool)}, 1)[0]
    assert out[1] == task.tgt_tokenizer.decode(cut)
    calls = spy(monkeypatch)
    refusing = write_checkpoint(tmp_path / "r.ckpt", dm={"max_len": 16, "truncate": False})
    for argv in ([refusing, SOURCES[2], long], [path, SOURCES[2], long, "--no-truncate"]):
        rc, out, err = run_main(capsys, *argv)
        assert rc == 2 and out == [] and "the command line, line 2" in err and "data.max_len" in err
    assert calls == []  # refused before any decoding


# ---- the checkpoint a path names ----------------------------------------------------------------------------
def test_a_run_directory_resolves_to_its_best_checkpoint_else_last(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("step9.ckpt", "last.ckpt"):
        (run / "checkpoints" / name).write_bytes(b"")
    results = run / "results.json"
    results.write_text(json.dumps({"best_checkpoint": str(run / "checkpoints" / "step9.ckpt")}))
    assert zt.checkpoint_path(str(run))[0] == run / "checkpoints" / "step9.ckpt"
    results.write_text(json.dumps({"best_checkpoint": "/elsewhere/checkpoints/step9.ckpt"}))  # the run dir moved
    assert zt.checkpoint_path(str(run))[0] == run / "checkpoints" / "step9.ckpt"
    for best in (None, "/elsewhere/step3.ckpt"):
        results.write_text(json.dumps({"best_checkpoint": best}))
        path, why = zt.checkpoint_path(str(run))
        assert path == run / "checkpoints" / "last.ckpt" and "last.ckpt" in why
    results.unlink()
    assert zt.checkpoint_path(str(run))[0] == run / "checkpoints" / "last.ckpt"
    f = run / "checkpoints" / "step9.ckpt"
    assert zt.checkpoint_path(str(f)) == (f, "the checkpoint given")


# ---- bad input: exit 2, one message, nothing decoded --------------------------------------------------------
def foreign(tmp_path, name, ckpt):
    path = tmp_path / name
    torch.save(ckpt, path)
    return path


@pytest.mark.parametrize(
    "kind, message",
    [
        ("classification", "task=classification"),
        ("lm", "python -m zoo.generate"),
        ("interop", "model.init_from"),
        ("unknown", "not recorded"),
        ("garbage", "not a readable checkpoint"),
        ("missing", "does not exist"),
        ("empty_dir", "holds no checkpoint"),
        ("multirun", "it holds the runs 0, 1"),
    ],
)
def test_a_path_that_is_no_translation_checkpoint_is_refused(kind, message, tmp_path, monkeypatch, capsys):
    hp = {"arch": "encoder_only", "model": {}, "tokenizer": {"json": "{}"}}
    path = {
        "classification": lambda: foreign(
            tmp_path, "c.ckpt", {"zoo_task": "Classification", "hyper_parameters": hp, "zoo_data": {"dataset": "sst2"}}
        ),
        "lm": lambda: foreign(tmp_path, "l.ckpt", {"zoo_task": "LanguageModeling", "hyper_parameters": hp}),
        "interop": lambda: foreign(tmp_path, "i.ckpt", {"hyper_parameters": hp, "zoo_interop": {"source": "x"}}),
        "unknown": lambda: foreign(tmp_path, "u.ckpt", {"hyper_parameters": hp}),
        "garbage": lambda: (tmp_path / "g.ckpt").write_bytes(b"not a checkpoint") and tmp_path / "g.ckpt",
        "missing": lambda: tmp_path / "nothing.ckpt",
        "empty_dir": lambda: tmp_path,
        "multirun": lambda: (
            [(tmp_path / str(i)).mkdir() or (tmp_path / str(i) / "results.json").write_text("{}") for i in (0, 1)]
            and tmp_path
        ),
    }[kind]()
    monkeypatch.setattr(zt, "load", lambda *a, **k: pytest.fail("the model was built"))
    monkeypatch.setattr("sys.stdin", io.StringIO("Ein Hund.\n"))
    rc, out, err = run_main(capsys, path, SOURCES[0])
    assert rc == 2 and out == [] and err.startswith("zoo.translate: error:") and "Traceback" not in err
    assert message in err and (kind in ("empty_dir", "multirun") or str(path) in err)


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        (["--input", "{tmp}/empty.txt"], None, "{tmp}/empty.txt gave nothing"),
        (["--input", "{tmp}/blank.txt"], None, "{tmp}/blank.txt gave only blank lines"),
        (["--input", "{tmp}/none.txt"], None, "--input {tmp}/none.txt does not exist"),
        (["--input", "{tmp}"], None, "--input {tmp} is a folder; give a text file"),
        ([], "", "stdin gave nothing"),
        (["--input", "-"], "\n \n", "stdin gave only blank lines"),
        (["Ein Hund.", "--input", "{tmp}/blank.txt"], None, "not both"),
        (["Ein Hund.", "--source-lang", "fr"], None, "--source-lang fr, but {ckpt} translates de->en"),
        (["Ein Hund.", "--target-lang", "de"], None, "--target-lang de, but {ckpt} translates de->en"),
        (["Ein Hund.", "--beam", "0"], None, "--beam=0 must be >= 1"),
        (["Ein Hund.", "--max-len-b", "-1"], None, "--max-len-b=-1 must be >= 0"),
        (["Ein Hund.", "--device", "tpu"], None, "--device='tpu' must be cpu or cuda"),
    ],
)
def test_bad_input_or_options_exit_2_before_decoding(argv, stdin, message, ckpt, tmp_path, monkeypatch, capsys):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("\n  \n")
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin or ""))
    monkeypatch.setattr(zt, "load", lambda *a, **k: pytest.fail("the model was built"))
    rc, out, err = run_main(capsys, ckpt, *[a.format(tmp=tmp_path) for a in argv])
    assert rc == 2 and out == [] and "Traceback" not in err
    assert message.format(tmp=tmp_path, ckpt=ckpt) in err


def test_a_gpu_device_without_cuda_is_refused_before_loading(ckpt, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(zt, "load", lambda *a, **k: pytest.fail("the model was built"))
    rc, out, err = run_main(capsys, ckpt, SOURCES[0], "--device", "cuda")
    assert rc == 2 and out == [] and "--device=cuda: this torch sees no CUDA GPU" in err


def test_a_beam_wider_than_the_vocabulary_is_refused(ckpt, monkeypatch, capsys):
    calls = spy(monkeypatch)
    vocab = task_of(ckpt)[0].model.cfg.vocab_size
    rc, out, err = run_main(capsys, ckpt, SOURCES[0], "--beam", vocab + 1)
    assert rc == 2 and out == [] and calls == [] and f"larger than the target vocabulary ({vocab} tokens)" in err
    rc, out, _ = run_main(capsys, ckpt, SOURCES[0], "--beam", vocab)
    assert rc == 0 and calls[0][0] == vocab


def test_input_lines_break_as_the_data_readers_and_bad_bytes_are_named(ckpt, tmp_path, monkeypatch, capsys):
    """--input and stdin split at \\r\\n, \\r and \\n only (docs/data.md's rule: U+2028 stays in its line);
    a file that is not UTF-8 is refused with its line and a fix that zoo.translate takes."""
    calls = []
    monkeypatch.setattr(zt, "translate", lambda task, tok, lines, *a: calls.append(lines) or [""] * len(lines))
    text = "Ein Hund.\rZwei\u2028Katzen.\r\nDrei.\n"
    (tmp_path / "in.de").write_bytes(text.encode())
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert run_main(capsys, ckpt, "--input", tmp_path / "in.de")[0] == 0
    assert run_main(capsys, ckpt)[0] == 0
    assert calls == [["Ein Hund.", "Zwei\u2028Katzen.", "Drei."]] * 2
    (tmp_path / "bad.de").write_bytes(b"Ein Hund.\n\xff\xfe\n")
    rc, out, err = run_main(capsys, ckpt, "--input", tmp_path / "bad.de")
    assert rc == 2 and "bad.de, line 2: not valid UTF-8" in err and "give a UTF-8 text file" in err
    assert "data.encoding" not in err


def test_an_unknown_flag_is_argparses_exit_2(ckpt, capsys):
    with pytest.raises(SystemExit) as e:
        zt.main([str(ckpt), "--beams", "2"])
    assert e.value.code == 2 and "--beams" in capsys.readouterr().err


# ---- real runs of every architecture (e2e) --------------------------------------------------------------------
RUN_CELLS = {  # +cell option -> its config (a global package beside the user's data config)
    "encoder_decoder": "arch: encoder_decoder\n",
    "decoder_only": "arch: decoder_only\n",
    "prefix_lm": "arch: decoder_only\nmodel:\n  mask: prefix\n",
    "encoder_ar": "arch: encoder_only\n",
    "cmlm_mask_predict": "arch: encoder_only\ntask:\n  objective: cmlm_mask_predict\n",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{cell: run dir} of five 8-step runs (one multirun) on 120 Multi30k training pairs, 8 test pairs.

    data.max_len=24 cuts every test pair's sides to at most 23 tokens + EOS and data.max_tokens=48 holds one
    such pair only: each test batch is one sentence, so the run's test decoding (examples.json) used the length
    limit of each sentence alone, as zoo.translate does."""
    d = tmp_path_factory.mktemp("runs")
    val = multi30k_pairs("val", 108)
    splits = {"train": multi30k_pairs("train", 120), "val": val[:4], "test": val[100:]}
    for split, pairs in splits.items():
        for k, lang in enumerate(("de", "en")):
            (d / f"{split}.{lang}").write_text("".join(p[k] + "\n" for p in pairs), encoding="utf-8")
    conf = d / "conf"
    (conf / "data").mkdir(parents=True)
    (conf / "cell").mkdir()
    (conf / "data" / "pairs.yaml").write_text(
        "defaults: [parallel_text]\n"
        + "".join(f"{s}: {{src: {d / s}.de, tgt: {d / s}.en}}\n" for s in splits)
        + "src_lang: de\ntgt_lang: en\nvocab_size: 300\nmax_tokens: 48\nmax_len: 24\n"
    )
    for cell, text in RUN_CELLS.items():
        (conf / "cell" / f"{cell}.yaml").write_text("# @package _global_\n" + text)
    sweep = d / "sweep"
    out = run_cli(
        [
            "--config-dir",
            str(conf),
            "-m",
            f"+cell={','.join(RUN_CELLS)}",
            "task=translation",
            "data=pairs",
            *("model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_layers=1", "model.max_len=64"),
            "model.tie_embeddings=false",  # an untied head: the few-step models' hypotheses are not all empty
            *("trainer.max_steps=8", "task.scheduler.warmup_steps=4", "task.beam_size=2", "task.max_len_b=4"),
            *("trainer.enable_model_summary=false", "trainer.num_sanity_val_steps=0", "logger=csv", "threads=1"),
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=d,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return {cell: sweep / str(i) for i, cell in enumerate(RUN_CELLS)}, d / "test.de"


@pytest.mark.e2e
@pytest.mark.parametrize("cell", list(RUN_CELLS))
def test_translate_equals_the_runs_test_decoding(cell, runs, capsys):
    """Greedy (--beam 1) gives the run's test hypotheses, beam 2 (the run's task.beam_size, also the default)
    its beam hypotheses, for every architecture and both encoder_only objectives; the run directory resolves
    to results.json's best_checkpoint (else last.ckpt)."""
    dirs, test_src = runs
    run = dirs[cell]
    results = json.loads((run / "results.json").read_text())
    examples = json.loads((run / "examples.json").read_text())
    assert examples["ids"] == list(range(8))  # the test file's line order
    objective = {"encoder_ar": "encoder_ar", "cmlm_mask_predict": "cmlm_mask_predict"}.get(cell, "translation")
    assert results["objective"] == objective
    rc, greedy, err = run_main(capsys, run, "--input", test_src, "--beam", "1")
    best = results.get("best_checkpoint")
    assert rc == 0 and f"zoo.translate: {best or run / 'checkpoints' / 'last.ckpt'} (" in err
    assert greedy == examples["hyp"] and any(greedy)
    for argv in (["--beam", "2"], []):
        rc, beam, _ = run_main(capsys, run, "--input", test_src, *argv)
        assert rc == 0 and beam == examples["hyp_beam"]
    assert examples["hyp"] != examples["hyp_beam"]  # measured: the two decoders differ, so each equality tells

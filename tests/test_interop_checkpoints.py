"""Every objective's checkpoint stores the vocabulary size of the model it holds (model.vocab_size = the rows of
its token embedding and LM head; masked_lm's counts the <mask> it adds past the data's vocabulary), and rebuilds
to the same shapes on each reload path: zoo.convert's (model_from_checkpoint), zoo.generate's, the task's own
(load_from_checkpoint: resume, testing) and model.init_from's (init_source, from_data, the task, load_weights)."""

import pytest
import torch
from hydra.utils import get_class, instantiate
from zoo_run import TINY_MODEL, make_cfg, needs_shared

from zoo.data.bpe import tokenizer_from_state
from zoo.interop.checkpoints import model_from_checkpoint
from zoo.interop.init_from import init_source, load_weights
from zoo.interop.load import read_checkpoint
from zoo.run.model_config import from_data
from zoo.run.train import run

pytestmark = [pytest.mark.e2e, needs_shared, pytest.mark.usefixtures("one_thread")]

QUICK = [*TINY_MODEL, "logger=csv", "trainer.enable_model_summary=false", "trainer.max_steps=2"]
LM = [
    *QUICK,
    "model.max_len=64",
    "data.block_size=32",
    "data.batch_size=4",
    "data.batches_per_epoch=2",
    "data.val_windows=4",
    "task.sample.max_new_tokens=2",
]
MT = [
    *QUICK,
    "data.limit=64",
    "data.vocab_size=120",
    "data.max_tokens=512",
    "task.beam_size=1",
    "task.max_len_b=1",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
]
CLS = [
    *QUICK,
    "data.limit=64",
    "data.vocab_size=120",
    "data.batch_size=16",
    "model.max_len=128",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
]
# (arch, overrides, objective): every objective of docs/tasks.md
RUNS = [
    ("decoder_only", LM, "causal_lm"),
    ("decoder_only", [*LM, "model.mask=prefix"], "prefix_lm"),
    ("encoder_only", ["task=lm", "data=tiny_shakespeare", *LM], "entp"),
    ("encoder_only", ["task=lm", "data=tiny_shakespeare", *LM, "task.objective=masked_lm"], "masked_lm"),
    ("encoder_decoder", ["task=lm", "data=tiny_shakespeare", *LM], "prefix_continuation"),
    ("encoder_decoder", [*MT, "data.joint_vocab=false"], "translation"),
    ("decoder_only", ["task=translation", "data=multi30k", *MT], "translation"),
    ("encoder_only", ["task=translation", "data=multi30k", *MT], "encoder_ar"),
    (
        "encoder_only",
        ["task=translation", "data=multi30k", *MT, "task.objective=cmlm_mask_predict", "task.nat_iterations=1"],
        "cmlm_mask_predict",
    ),
    ("encoder_only", CLS, "classification"),
    ("decoder_only", ["task=classification", "data=sst2", *CLS], "classification"),
    ("encoder_decoder", ["task=classification", "data=sst2", *CLS], "classification"),
]


def data_vocab(hp: dict) -> dict:
    """The vocabulary sizes of the checkpoint's tokenizers (translation: {"src", "tgt"})."""
    tok = hp["tokenizer"]
    if "src" in tok:
        return {
            "vocab_size": tokenizer_from_state(tok["tgt"]).vocab_size,
            "src": tokenizer_from_state(tok["src"]).vocab_size,
        }
    return {"vocab_size": tokenizer_from_state(tok).vocab_size}


def shapes(state: dict) -> dict:
    return {k: tuple(v.shape) for k, v in state.items()}


@pytest.mark.parametrize("arch, over, objective", RUNS, ids=[f"{a}-{o}" for a, _, o in RUNS])
def test_checkpoint_vocab_is_the_embedding_rows_and_reloads(tmp_path, arch, over, objective):
    run(make_cfg(tmp_path / "run", over, arch=arch))
    path = tmp_path / "run" / "checkpoints" / "last.ckpt"
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    hp = ckpt["hyper_parameters"]
    assert hp.get("objective", "classification") == objective
    state = {k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    tgt, src = ("tgt_embed", "src_embed") if arch == "encoder_decoder" else ("embed", "embed")
    vocab, data = hp["model"]["vocab_size"], data_vocab(hp)
    assert vocab == state[f"{tgt}.tok.weight"].shape[0] == state["lm_head.weight"].shape[0]
    assert (hp["model"].get("src_vocab_size") or vocab) == state[f"{src}.tok.weight"].shape[0]
    assert vocab == data["vocab_size"] + (objective == "masked_lm")  # <mask>: one id past the data's vocabulary
    if "src" in data:
        assert (hp["model"].get("src_vocab_size") or vocab) == data["src"]

    # zoo.convert to-hf / from a run: the model its config builds takes the weights as they are
    assert shapes(model_from_checkpoint(ckpt).state_dict()) == shapes(state)
    # the task's own reload (resume, testing the best checkpoint)
    task = get_class(make_cfg(tmp_path / "x", over, arch=arch).task._target_).load_from_checkpoint(
        path, weights_only=True
    )
    assert shapes(task.model.state_dict()) == shapes(state)
    if objective in ("causal_lm", "prefix_lm"):
        from zoo.run.generate import load

        assert shapes(load(str(path))[0].state_dict()) == shapes(state)

    # model.init_from=<this run>: a new run on the same data builds the same shapes and takes every weight
    cfg = make_cfg(tmp_path / "init", [*over, f"model.init_from={tmp_path / 'run'}"], arch=arch)
    source = init_source(cfg)
    ids = {k: hp["model"][k] for k in ("pad_id", "bos_id", "eos_id", "num_classes") if k in hp["model"]}
    info = {**ids, "vocab_size": data["vocab_size"], "src_vocab_size": data.get("src")}
    model_cfg = from_data(cfg, {k: v for k, v in info.items() if v is not None}, source, "the run's data")
    task = instantiate(cfg.task, arch=arch, model=model_cfg, tokenizer=hp["tokenizer"], _convert_="all")
    assert shapes(task.model.state_dict()) == shapes(state)
    load_weights(task.model, source)
    assert all(torch.equal(task.model.state_dict()[k], v) for k, v in state.items())


def test_a_masked_lm_checkpoint_saved_with_the_data_vocab_still_reloads(tmp_path):
    """A masked_lm checkpoint written before hyper_parameters held mask_id stores the data's vocab_size, one row
    less than its embedding: zoo.convert's and model.init_from's readers count its <mask> back in."""
    from zoo.model import build_model
    from zoo.model.config import ModelConfig

    cfg = ModelConfig(vocab_size=31, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=32)
    model = build_model("encoder_only", cfg)
    old = {"arch": "encoder_only", "model": {**cfg.__dict__, "vocab_size": 30}, "objective": "masked_lm"}
    ckpt = {"hyper_parameters": old, "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}}
    assert model_from_checkpoint(ckpt).cfg.vocab_size == 31
    torch.save(ckpt, tmp_path / "old.ckpt")
    read = read_checkpoint(tmp_path / "old.ckpt")
    assert (read.cfg.vocab_size, read.added_tokens) == (31, 1)
    new = {**old, "model": {**old["model"], "vocab_size": 31}, "mask_id": 30}  # as zoo.tasks.lm saves it now
    assert model_from_checkpoint({**ckpt, "hyper_parameters": new}).cfg.vocab_size == 31

"""One id in two roles: HF checkpoints that pad with their eos (GPT-2 fine-tunes set pad_token_id =
eos_token_id; seq2seq ones do too) convert with HF's eos as zoo's eos (zoo_ids: eos keeps a shared id, pad gets a
placeholder), so zoo's greedy decoding stops where transformers' does, through `zoo.convert from-hf`, and
`to-hf` writes pad = eos back."""

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_bart import tiny_bart  # noqa: E402
from test_interop_gpt2 import tiny_gpt2  # noqa: E402
from test_interop_util import perturb, seeded, seq2seq_batch  # noqa: E402

from zoo.interop.checkpoints import model_from_checkpoint  # noqa: E402
from zoo.interop.convert import main  # noqa: E402
from zoo.model.decoding.generate import left_pad  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

NEW = 10  # tokens generated


def inputs(family: str) -> dict:
    """Three prompts (GPT-2, left-padded) or sources (BART, right-padded) and their attention mask."""
    if family == "gpt2":
        ids, kpm = left_pad([[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]], 0)
    else:
        seeded(4)
        ids, kpm, _ = seq2seq_batch([10, 6, 3], 97, 1, 1, start=2)
    return {"input_ids": ids, "attention_mask": (~kpm).long()}


def pick_eos(out: torch.Tensor, start: int) -> int:
    """A token of the free-running greedy output (B, T) (its new tokens from column `start`), none of the inputs'
    padding ids 0 - 2, that some row first emits before its last step and some row never emits: as eos, some
    rows stop early and some run on."""
    new = out[:, start:]
    for t in new[:, :-1].unique().tolist():
        if t > 2 and (new != t).all(1).any():
            return t
    raise AssertionError(f"no token stops one row and not another in {new.tolist()}")


def pad_is_eos_source(family: str, path):
    """A random tiny model of `family` (perturbed: varied greedy outputs) whose pad_token_id is its eos_token_id
    (GPT-2: bos too), chosen so the greedy run stops some rows early; saved in path."""
    hf = tiny_gpt2() if family == "gpt2" else tiny_bart()
    seeded(5)
    perturb(hf, 0.3)
    hf.generation_config.eos_token_id = None
    with torch.no_grad():
        free = hf.generate(**inputs(family), do_sample=False, max_new_tokens=NEW)
    eos = pick_eos(free, free.shape[1] - NEW)
    roles = ("pad_token_id", "eos_token_id") + (("bos_token_id",) if family == "gpt2" else ())
    for c in (hf.config, hf.generation_config):
        for role in roles:
            setattr(c, role, eos)
    hf.save_pretrained(path)
    return eos


def split_at_eos(row: list[int], eos: int) -> tuple[list[int], list[int]]:
    """(the tokens up to and including the first eos, the rest)."""
    n = row.index(eos) + 1 if eos in row else len(row)
    return row[:n], row[n:]


@pytest.mark.parametrize("family", ["gpt2", "bart"])
def test_pad_is_eos_stops_where_transformers_does(tmp_path, family):
    eos = pad_is_eos_source(family, tmp_path / "src")
    assert main(["from-hf", str(tmp_path / "src"), str(tmp_path / "z.ckpt")]) == 0
    model = model_from_checkpoint(torch.load(tmp_path / "z.ckpt", weights_only=False))
    assert model.cfg.eos_id == eos and model.cfg.pad_id != eos  # HF's eos is zoo's eos
    auto = tf.AutoModelForCausalLM if family == "gpt2" else tf.AutoModelForSeq2SeqLM
    src = auto.from_pretrained(tmp_path / "src").eval()
    batch = inputs(family)
    with torch.no_grad():
        want = src.generate(**batch, do_sample=False, num_beams=1, max_new_tokens=NEW)
        if family == "gpt2":
            got = model.generate(
                batch["input_ids"],
                NEW,
                key_padding_mask=batch["attention_mask"] == 0,
                temperature=0.0,
                eos_id=model.cfg.eos_id,
            )
        else:
            got = model.generate(batch["input_ids"], NEW, src_key_padding_mask=batch["attention_mask"] == 0)
    assert got.shape == want.shape  # the loop ends at the same step
    start = want.shape[1] - NEW  # the prompt (GPT-2) or the decoder start (BART), then the new tokens
    assert torch.equal(got[:, :start], want[:, :start])
    stopped = 0
    for g, w in zip(got[:, start:].tolist(), want[:, start:].tolist()):
        (g_head, g_tail), (w_head, w_tail) = split_at_eos(g, eos), split_at_eos(w, eos)
        assert g_head == w_head  # the same tokens, each row up to its eos
        assert set(w_tail) <= {eos} and set(g_tail) <= {model.cfg.pad_id}  # then each one's padding
        stopped += bool(w_tail)
    assert 0 < stopped < len(got)  # some rows stop early, some run on
    # and back: the export pads with eos, as the source, and transformers generates the same on it
    assert main(["to-hf", str(tmp_path / "z.ckpt"), str(tmp_path / "out")]) == 0
    out = auto.from_pretrained(tmp_path / "out").eval()
    assert out.config.pad_token_id == out.config.eos_token_id == eos
    with torch.no_grad():
        assert torch.equal(out.generate(**batch, do_sample=False, num_beams=1, max_new_tokens=NEW), want)

"""A zoo-trained encoder_decoder, exported: the documented Marian and BART runs (docs/interop.md, "Runs that
export"), trained a few steps on toy reversal pairs with zoo's tokenizer, written by to_hf and loaded by
transformers, start decoding from zoo's start token and give zoo's greedy tokens, stops at eos included."""

import pytest
import torch
import torch.nn.functional as F

tf = pytest.importorskip("transformers")

from test_interop_runs import RUNS, run_model  # noqa: E402
from test_interop_util import seeded  # noqa: E402
from zoo_run import reversal_pairs, reversal_tokenizer  # noqa: E402

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.families.registry import HF_CLASSES  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

V, PAD, BOS, EOS = 30, 0, 1, 2  # reversal_tokenizer's size and zoo's special ids
NEW = 12  # tokens decoded


def padded(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (B, T) right-padded with PAD, key padding mask (B, T) True = padding)."""
    ids = torch.full((len(seqs), max(map(len, seqs))), PAD)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    return ids, ids.eq(PAD)


def train(model, steps: int = 60) -> None:
    """`steps` AdamW steps of teacher-forced cross-entropy on 64 reversal pairs, each target ending in EOS."""
    pairs = reversal_pairs(64)
    src, skpm = padded([s for s, _ in pairs])
    tgt_in, tkpm = padded([[model.start_id, *t] for _, t in pairs])
    tgt_out, _ = padded([[*t, EOS] for _, t in pairs])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        logits = model(src, tgt_in, src_key_padding_mask=skpm, tgt_key_padding_mask=tkpm)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


@pytest.mark.parametrize("family", ["marian", "bart"])
def test_a_trained_run_decodes_the_same_in_transformers(tmp_path, family):
    seeded(0)
    model = run_model(tmp_path, RUNS[family], vocab=V)
    train(model)
    out = zhf.to_hf(model, tmp_path / "hf", tokenizer=reversal_tokenizer())
    hf = tf.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    assert type(hf).__name__ == HF_CLASSES[family]
    assert model.start_id == BOS  # zoo's decoder starts from bos (model.decoder_start_id=null)
    assert hf.config.decoder_start_token_id == hf.generation_config.decoder_start_token_id == BOS
    assert (hf.config.pad_token_id, hf.config.eos_token_id) == (PAD, EOS)
    src, skpm = padded([s for s, _ in reversal_pairs(6, seed=9)])  # pairs it did not train on
    with torch.no_grad():
        got = model.generate(src, NEW, src_key_padding_mask=skpm)
        want = hf.generate(src, attention_mask=(~skpm).long(), do_sample=False, num_beams=1, max_new_tokens=NEW)
    assert torch.equal(got, want)
    stops = got[:, 1:].eq(EOS).any(1)
    assert 0 < stops.sum() < len(got)  # some rows end at eos before NEW tokens: the stop is compared too

"""An export is complete: config.json names the dtype of the tensors it ships (a bf16 checkpoint stays bf16
through `zoo.convert to-hf`), every `*_token_id` of the source's config.json and generation_config.json survives
HF -> zoo -> HF (BART's and Marian's forced_eos_token_id included), and transformers' own `generate` gives the
same tokens on the source and on the export (generation_config.json written back)."""

import json

import pytest
import torch

tf = pytest.importorskip("transformers")

from safetensors import safe_open  # noqa: E402
from test_interop_bart import tiny_bart  # noqa: E402
from test_interop_bert import tiny_bert  # noqa: E402
from test_interop_gpt2 import tiny_gpt2  # noqa: E402
from test_interop_marian import tiny_marian  # noqa: E402
from test_interop_t5 import V11, tiny_t5  # noqa: E402
from test_interop_util import seeded, seq2seq_batch  # noqa: E402

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.checkpoints import zoo_checkpoint  # noqa: E402
from zoo.interop.convert import main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def with_generation(hf, **settings):
    """hf with these generation_config settings (beam search, forced tokens, banned words: what a published
    checkpoint's generation_config.json holds)."""
    for k, v in settings.items():
        setattr(hf.generation_config, k, v)
    return hf


# each family as published checkpoints configure generation (facebook/bart-large-cnn, Helsinki-NLP/opus-mt-*,
# t5-small, gpt2); BERT does not generate
SOURCES = {
    "gpt2": lambda: with_generation(tiny_gpt2(), num_beams=2, no_repeat_ngram_size=2),
    "bert": tiny_bert,
    "bart": lambda: with_generation(
        tiny_bart(), num_beams=2, forced_bos_token_id=0, forced_eos_token_id=2, no_repeat_ngram_size=2
    ),
    "marian": lambda: with_generation(tiny_marian(), num_beams=2, forced_eos_token_id=0, bad_words_ids=[[58]]),
    "t5": lambda: with_generation(tiny_t5(), num_beams=2),
    "t5_v1.1": lambda: with_generation(tiny_t5(**V11), num_beams=2, no_repeat_ngram_size=3),
}
GENERATES = [s for s in SOURCES if s != "bert"]


def token_ids(d: dict) -> dict:
    return {k: v for k, v in d.items() if k.endswith("_token_id")}


def round_trip(tmp_path, source) -> tuple[torch.nn.Module, object]:
    """(source model, export dir) after `zoo.convert from-hf` then `to-hf`, as a user runs them."""
    hf = SOURCES[source]()
    hf.save_pretrained(tmp_path / "src")
    assert main(["from-hf", str(tmp_path / "src"), str(tmp_path / "zoo.ckpt")]) == 0
    assert main(["to-hf", str(tmp_path / "zoo.ckpt"), str(tmp_path / "out")]) == 0
    return hf, tmp_path / "out"


@pytest.mark.parametrize("source", SOURCES)
def test_every_token_id_survives_hf_zoo_hf(tmp_path, source):
    hf, out = round_trip(tmp_path, source)
    src_config = json.loads((tmp_path / "src" / "config.json").read_text())
    config = json.loads((out / "config.json").read_text())
    assert {k: config.get(k) for k in token_ids(src_config)} == token_ids(src_config)
    assert all(v is None for k, v in token_ids(config).items() if k not in src_config)
    if source in ("bart", "marian"):
        assert config["forced_eos_token_id"] == src_config["forced_eos_token_id"] is not None
    if source in GENERATES:
        src_gen = json.loads((tmp_path / "src" / "generation_config.json").read_text())
        gen = json.loads((out / "generation_config.json").read_text())
        assert {k: gen.get(k) for k in token_ids(src_gen)} == token_ids(src_gen)
        for key in ("num_beams", "no_repeat_ngram_size", "bad_words_ids"):
            assert gen.get(key) == src_gen.get(key), key
    else:
        assert not (out / "generation_config.json").exists()


def prompt(hf):
    """A batch of two right-padded sources (seq2seq) or two left-padded prompts (GPT-2)."""
    c = hf.config
    seeded(3)
    if c.is_encoder_decoder:
        src, skpm, _ = seq2seq_batch([7, 4], c.vocab_size, c.pad_token_id, 2, start=c.decoder_start_token_id)
        return {"input_ids": src, "attention_mask": (~skpm).long()}
    ids = torch.randint(3, c.vocab_size, (2, 5))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = c.eos_token_id, 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("source", GENERATES)
def test_transformers_generate_gives_the_same_tokens_on_the_export(tmp_path, source):
    """transformers' generate with each model's own generation_config (beam search, forced first / last
    tokens, banned words, no repeated n-grams): the same tokens from the source and from the export."""
    hf, out = round_trip(tmp_path, source)
    back = type(hf).from_pretrained(out).eval()
    batch = prompt(hf)
    with torch.no_grad():
        want = hf.generate(**batch, max_new_tokens=8)
        got = back.generate(**batch, max_new_tokens=8)
    assert torch.equal(got, want)


@pytest.mark.parametrize("source", ["gpt2", "bert", "bart", "t5"])
def test_config_json_names_the_dtype_it_ships(tmp_path, source):
    """to_hf of a model in float32 or bfloat16: config.json's dtype (the key transformers writes) is the dtype
    of every tensor in model.safetensors, and transformers loads the export in it."""
    hf = SOURCES[source]()
    for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
        model, _ = zhf.from_hf(hf, dtype=dtype)
        out = zhf.to_hf(model, tmp_path / name)
        assert json.loads((out / "config.json").read_text())["dtype"] == name
        with safe_open(str(out / "model.safetensors"), "pt") as f:
            assert {f.get_tensor(k).dtype for k in f.keys()} == {dtype}
        back = type(hf).from_pretrained(out, dtype="auto")
        assert {p.dtype for p in back.parameters()} == {dtype}


def test_to_hf_of_a_bf16_checkpoint_keeps_bf16_and_says_so(tmp_path, capsys):
    """`zoo.convert to-hf` of a checkpoint whose weights are bf16 (a run in bf16-true precision, or a converted
    model saved in bf16) writes bf16 tensors and dtype bfloat16, and prints the dtype it wrote."""
    model, _ = zhf.from_hf(tiny_gpt2(), dtype=torch.bfloat16)
    torch.save(zoo_checkpoint(model), tmp_path / "bf16.ckpt")
    assert main(["to-hf", str(tmp_path / "bf16.ckpt"), str(tmp_path / "out")]) == 0
    assert "bfloat16" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "config.json").read_text())["dtype"] == "bfloat16"
    with safe_open(str(tmp_path / "out" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}


def test_a_model_whose_ids_changed_gets_a_generation_config_of_its_own(tmp_path):
    """A converted model whose special ids no longer are its source's (fine-tuned on another tokenizer) gets
    the generation config transformers derives from its own config.json, not the source's settings."""
    model, _ = zhf.from_hf(SOURCES["bart"]())
    model.cfg.eos_id = 5
    gen = json.loads((zhf.to_hf(model, tmp_path) / "generation_config.json").read_text())
    assert gen["eos_token_id"] == 5 and "num_beams" not in gen and "forced_bos_token_id" not in gen

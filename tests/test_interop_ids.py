"""Special-token ids and tokenizer roles through a conversion: HF -> zoo -> HF gives back each family's own ids
(config.json) and roles (tokenizer_config.json), never the placeholders zoo's ModelConfig needs where HF has no
pad / bos / eos or shares one id between two of them; a run on a pretrained tokenizer exports its tokenizer's.
Each family's tiny model carries its real layout of ids (GPT-2: bos = eos, no pad; BERT: pad only; ...)."""

import json

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_bart import tiny_bart  # noqa: E402
from test_interop_bert import tiny_bert  # noqa: E402
from test_interop_gpt2 import tiny_gpt2  # noqa: E402
from test_interop_marian import tiny_marian  # noqa: E402
from test_interop_t5 import tiny_t5  # noqa: E402

from zoo.data.bpe import SubwordTokenizer  # noqa: E402
from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.checkpoints import arch_of  # noqa: E402
from zoo.interop.convert import main  # noqa: E402
from zoo.interop.hf_tokenizer import hf_tokenizer_state  # noqa: E402
from zoo.model import build_model  # noqa: E402
from zoo.model.config import ModelConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

V = 97  # the test models' vocabulary
# per family: the HF model, then its tokenizer's special tokens {id: token} and roles, as the family's own
FAMILIES = {
    "gpt2": (
        lambda: tiny_gpt2(bos_token_id=V - 1, eos_token_id=V - 1, pad_token_id=None),
        {V - 1: "<|endoftext|>"},
        dict(bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>"),
    ),
    "bert": (
        lambda: tiny_bert(pad_token_id=0),
        {0: "[PAD]", 1: "[unused0]", 2: "[unused1]", 3: "[UNK]", 4: "[CLS]", 5: "[SEP]", 6: "[MASK]"},
        dict(pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]"),
    ),
    "bart": (
        tiny_bart,  # bos 0, pad 1, eos 2, decoder start = eos
        {0: "<s>", 1: "<pad>", 2: "</s>", 3: "<unk>", V - 1: "<mask>"},
        dict(
            bos_token="<s>",
            eos_token="</s>",
            unk_token="<unk>",
            sep_token="</s>",
            pad_token="<pad>",
            cls_token="<s>",
            mask_token="<mask>",
        ),
    ),
    "marian": (
        tiny_marian,  # eos 0, pad 58 = decoder start, no bos
        {0: "</s>", 1: "<unk>", 58: "<pad>"},
        dict(eos_token="</s>", unk_token="<unk>", pad_token="<pad>"),
    ),
    "t5": (
        tiny_t5,  # pad 0 = decoder start, eos 1, no bos
        {0: "<pad>", 1: "</s>", 2: "<unk>", V - 1: "<extra_id_0>", V - 2: "<extra_id_1>"},
        dict(
            eos_token="</s>",
            unk_token="<unk>",
            pad_token="<pad>",
            additional_special_tokens=["<extra_id_0>", "<extra_id_1>"],
        ),
    ),
}
IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")


def tokenizer_of(specials: dict, roles: dict):
    """A word-level fast tokenizer of V tokens: the family's special tokens at their ids, "w<i>" elsewhere."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    vocab = {specials.get(i, f"w{i}"): i for i in range(V)}
    unk = roles.get("unk_token")
    tok = Tokenizer(models.WordLevel(vocab, unk_token=unk or "w3"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(t, special=True) for t in specials.values()])
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, **roles)


def hf_dir(family, path):
    """save_pretrained of the family's tiny model and its tokenizer in path."""
    make, specials, roles = FAMILIES[family]
    make().save_pretrained(path)
    tokenizer_of(specials, roles).save_pretrained(path)
    return path


def ids_of(path) -> dict:
    return {k: getattr(tf.AutoConfig.from_pretrained(path), k, None) for k in IDS}


def roles_of(path) -> dict:
    """The tokenizer's roles: {role: token}, the ids of its special tokens, and its pad / bos / eos ids."""
    tok = tf.AutoTokenizer.from_pretrained(path)
    return {
        "map": tok.special_tokens_map,
        "special_ids": sorted(tok.all_special_ids),
        "ids": (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id),
    }


@pytest.mark.parametrize("family", FAMILIES)
def test_round_trip_gives_back_the_special_ids_and_roles(tmp_path, family):
    src = hf_dir(family, tmp_path / "src")
    want_ids, want_roles = ids_of(src), roles_of(src)
    model, cfg = zhf.from_hf(src)
    assert len({cfg.pad_id, cfg.bos_id, cfg.eos_id}) == 3  # zoo's ModelConfig needs distinct ids
    for key, role in (("pad_id", "pad_token_id"), ("bos_id", "bos_token_id"), ("eos_id", "eos_token_id")):
        if isinstance(want_ids[role], int) and list(want_ids.values()).count(want_ids[role]) == 1:
            assert getattr(cfg, key) == want_ids[role]  # HF's own id wherever it is one role's only
    # in Python
    out = zhf.to_hf(model, tmp_path / "py", tokenizer=hf_tokenizer_state(src))
    assert (ids_of(out), roles_of(out)) == (want_ids, want_roles)
    # through zoo.convert: from-hf writes a zoo checkpoint, to-hf reads it back
    assert main(["from-hf", str(src), str(tmp_path / "z.ckpt")]) == 0
    assert main(["to-hf", str(tmp_path / "z.ckpt"), str(tmp_path / "cli")]) == 0
    assert (ids_of(tmp_path / "cli"), roles_of(tmp_path / "cli")) == (want_ids, want_roles)
    gen = (
        tf.GenerationConfig.from_pretrained(tmp_path / "cli")
        if (tmp_path / "cli/generation_config.json").exists()
        else None
    )
    if family == "gpt2":  # generate pads with eos, as GPT-2's own: no token 0 taken for padding
        hf = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "cli")
        assert hf.generation_config.pad_token_id is None and hf.config.pad_token_id is None
    assert gen is None or gen.pad_token_id == want_ids["pad_token_id"]


def run_like(family, path):
    """(a zoo model with the ids a run on the family's tokenizer.json gets, SubwordTokenizer.model_ids: its
    roles' ids where they exist and are distinct, placeholders elsewhere; that tokenizer's state), as a run
    started from the converted checkpoint (model.init_from) saves them: no record of HF's ids."""
    tok = SubwordTokenizer.load(path / "tokenizer.json")
    model, cfg = zhf.from_hf(path)
    run = build_model(arch_of(model), ModelConfig(**{**cfg.__dict__, **tok.model_ids()}))
    run.load_state_dict(model.state_dict())
    assert not hasattr(run, "hf_special_ids")
    return run, tok.state_dict()


def test_a_run_on_gpt2s_tokenizer_exports_no_pad(tmp_path):
    """GPT-2's tokenizer has one special token, <|endoftext|>: a run on it holds placeholder pad / bos ids (0,
    1), and its export names <|endoftext|> bos and eos and no pad, as GPT-2 does, so HF's generate pads with
    eos and token 0 stays a token."""
    src = hf_dir("gpt2", tmp_path / "src")
    run, tok = run_like("gpt2", src)
    assert (run.cfg.pad_id, run.cfg.eos_id) == (0, V - 1)
    out = zhf.to_hf(run, tmp_path / "out", tokenizer=tok)
    assert ids_of(out) == {
        "pad_token_id": None,
        "bos_token_id": V - 1,
        "eos_token_id": V - 1,
        "decoder_start_token_id": None,
    }
    hf = tf.AutoModelForCausalLM.from_pretrained(out).eval()
    assert hf.generation_config.pad_token_id is None
    fast = tf.AutoTokenizer.from_pretrained(out)
    assert fast.pad_token is None and fast.eos_token == fast.bos_token == "<|endoftext|>"
    prompt = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        want = run.generate(prompt, 5, temperature=0.0)
    assert torch.equal(hf.generate(prompt, do_sample=False, max_new_tokens=5, eos_token_id=None), want)


def test_a_run_on_berts_tokenizer_pads_with_pad(tmp_path):
    """BERT's pad is [PAD] (id 0); a converted BERT keeps it (zoo_ids never hands HF's pad id to another role), and
    its export pads with [PAD], not [unused0]."""
    src = hf_dir("bert", tmp_path / "src")
    _, cfg = zhf.from_hf(src)
    assert cfg.pad_id == 0 and 0 not in (cfg.bos_id, cfg.eos_id)
    run, tok = run_like("bert", src)
    out = zhf.to_hf(run, tmp_path / "out", tokenizer=tok)
    assert ids_of(out)["pad_token_id"] == 0
    fast = tf.AutoTokenizer.from_pretrained(out)
    batch = fast(["w10 w11 w12", "w10"], padding=True)["input_ids"]
    assert fast.pad_token == "[PAD]" and batch[1][1:] == [0, 0]
    assert json.loads((out / "tokenizer_config.json").read_text())["pad_token"] == "[PAD]"

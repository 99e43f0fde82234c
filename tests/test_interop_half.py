"""Converted models in float16 and bfloat16: each family runs as transformers runs it in that dtype (zoo's logits
are as close to the float32 ones as transformers' own), or the dtype is refused with a message (T5 in float16,
whose overflow transformers guards with an fp32 feed-forward output and clamps zoo's blocks do not have), at
activations past float16's range too, where a float16 forward raises instead of returning inf / NaN."""

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_bart import tiny_bart  # noqa: E402
from test_interop_bert import tiny_bert  # noqa: E402
from test_interop_gpt2 import tiny_gpt2  # noqa: E402
from test_interop_marian import tiny_marian  # noqa: E402
from test_interop_t5 import V11, tiny_t5  # noqa: E402
from test_interop_util import right_padded, seq2seq_batch  # noqa: E402

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.blockers import Unsupported  # noqa: E402
from zoo.interop.checkpoints import model_from_checkpoint, zoo_checkpoint  # noqa: E402
from zoo.interop.precision import Float16Overflow, check_dtype  # noqa: E402
from zoo.model.decoding.generate import left_pad  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

HALF = (torch.float16, torch.bfloat16)
SOURCES = {
    "gpt2": tiny_gpt2,
    "bert": tiny_bert,
    "bart": tiny_bart,
    "marian": tiny_marian,
    "t5": tiny_t5,
    "t5_v1.1": lambda: tiny_t5(**V11),
}
REFUSED = {("t5", torch.float16), ("t5_v1.1", torch.float16)}


def logits_fn(hf):
    """f(model, is_zoo) -> logits at the real tokens of a right-padded batch (seq2seq: every target token)."""
    c = hf.config
    pad = c.pad_token_id
    if not c.is_encoder_decoder:
        ids, kpm = right_padded([12, 7, 3], c.vocab_size, pad)
        return lambda m, zoo: (m(ids, key_padding_mask=kpm) if zoo else m(ids, attention_mask=(~kpm).long()).logits)[
            ~kpm
        ]
    src, skpm, tgt = seq2seq_batch(
        [12, 7, 3],
        c.vocab_size,
        pad,
        6,
        start=c.decoder_start_token_id,
        tgt_high=min(pad, c.vocab_size) if pad > 3 else None,
    )
    return lambda m, zoo: (
        m(src, tgt, src_key_padding_mask=skpm)
        if zoo
        else m(input_ids=src, attention_mask=(~skpm).long(), decoder_input_ids=tgt).logits
    )


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("source", SOURCES)
def test_half_precision_runs_as_transformers_runs_it(tmp_path, source, dtype):
    """zoo's converted model in `dtype` against transformers' from_pretrained(dtype=...) (which keeps what the
    family keeps in float32): both finite, zoo's error against the float32 logits at most twice transformers'
    own plus half a unit of the dtype's rounding at the logits' scale, and zoo's logits within both errors of
    transformers'. A refused pair raises Unsupported naming the dtype and the one to use instead."""
    hf32 = SOURCES[source]()
    hf32.save_pretrained(tmp_path)
    family = hf32.config.model_type
    if (source, dtype) in REFUSED:
        with pytest.raises(Unsupported, match=r"t5 does not run in torch\.float16.*torch\.bfloat16"):
            zhf.from_hf(tmp_path, dtype=dtype)
        with pytest.raises(Unsupported, match=r"torch\.float16"):
            check_dtype(family, dtype)
        return
    f = logits_fn(hf32)
    zoo32, _ = zhf.from_hf(tmp_path)
    zoo, cfg = zhf.from_hf(tmp_path, dtype=dtype)
    assert {p.dtype for p in zoo.parameters()} == {dtype} and zoo.hf_family == family
    hf = type(hf32).from_pretrained(tmp_path, dtype=dtype).eval()
    with torch.no_grad():
        ref, got, want = f(zoo32, True), f(zoo, True).float(), f(hf, False).float()
        torch.testing.assert_close(ref, f(hf32, False), atol=1e-5, rtol=0)  # the float32 conversion is exact
    assert got.isfinite().all() and want.isfinite().all()
    if not hf32.config.is_encoder_decoder:  # padding positions too, left-padded (their queries see no key)
        ids, kpm = left_pad([[5, 6, 7, 8], [9, 10], [11]], cfg.pad_id)
        with torch.no_grad():
            assert zoo(ids, key_padding_mask=kpm).isfinite().all()
    unit = torch.finfo(dtype).eps * ref.abs().max()
    err_zoo, err_hf = (got - ref).abs().max(), (want - ref).abs().max()
    assert err_zoo <= 2 * err_hf + unit / 2, (err_zoo.item(), err_hf.item())
    assert (got - want).abs().max() <= err_zoo + err_hf + unit / 2


def ffn_outputs(hf):
    """The feed-forward output projections of an HF model (GPT-2's mlp.c_proj, BERT's output.dense, BART's and
    Marian's fc2, T5's wo): scaled up, they push the residual stream past float16's range, as the outlier
    features of large checkpoints do."""
    names = ("mlp.c_proj", "fc2", "DenseReluDense.wo")
    return [
        m for n, m in hf.named_modules() if n.endswith(names) or (n.endswith("output.dense") and "attention" not in n)
    ]


def overflowing(source, tmp_path, factor=3e6):
    """The float32 HF source with its feed-forward outputs times `factor`, saved in tmp_path; asserts that an
    activation passes float16's range (65504) in float32."""
    hf32 = SOURCES[source]()
    peak = []
    with torch.no_grad():
        for m in ffn_outputs(hf32):
            m.weight.mul_(factor)
            m.register_forward_hook(lambda mod, a, out: peak.append(out.abs().max().item()))
        logits_fn(hf32)(hf32, False)
    assert max(peak) > torch.finfo(torch.float16).max
    hf32.save_pretrained(tmp_path)
    return hf32


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("source", SOURCES)
def test_past_float16_range_as_transformers_or_refused_never_nan(tmp_path, source, dtype):
    """Activations past float16's range, every family and variant: in bfloat16 zoo runs as transformers does
    (finite, error against float32 at most twice transformers' own plus half a unit); in float16 transformers'
    GPT-2 / BERT / BART / Marian give inf / NaN, and zoo raises Float16Overflow naming bfloat16 (T5, which
    transformers clamps, is refused up front). zoo never returns a non-finite logit."""
    hf32 = overflowing(source, tmp_path)
    f = logits_fn(hf32)
    hf = type(hf32).from_pretrained(tmp_path, dtype=dtype).eval()
    if (source, dtype) in REFUSED:
        with pytest.raises(Unsupported, match=r"torch\.bfloat16"):
            zhf.from_hf(tmp_path, dtype=dtype)
        return
    zoo, _ = zhf.from_hf(tmp_path, dtype=dtype)
    with torch.no_grad():
        ref, want = f(hf32, False), f(hf, False).float()
        if dtype == torch.float16:
            assert not want.isfinite().all()  # transformers' own float16 model overflows
            with pytest.raises(Float16Overflow, match=r"not finite in torch\.float16.*torch\.bfloat16"):
                f(zoo, True)
            return
        got = f(zoo, True).float()
    assert got.isfinite().all() and want.isfinite().all()
    unit = torch.finfo(dtype).eps * ref.abs().max()
    assert (got - ref).abs().max() <= 2 * (want - ref).abs().max() + unit / 2


def test_generation_past_float16_range_raises(tmp_path):
    """zoo's own generate on an overflowing float16 GPT-2 raises too, and so does a converted checkpoint
    reloaded in float16."""
    overflowing("gpt2", tmp_path)
    zoo, _ = zhf.from_hf(tmp_path, dtype=torch.float16)
    prompt = torch.tensor([[5, 6, 7]])
    with torch.no_grad(), pytest.raises(Float16Overflow):
        zoo.generate(prompt, 3)
    again = model_from_checkpoint(zoo_checkpoint(zoo))
    assert next(again.parameters()).dtype == torch.float16
    with torch.no_grad(), pytest.raises(Float16Overflow):
        again(prompt)


def test_unknown_dtype_is_refused():
    with pytest.raises(Unsupported, match="torch.float64.*float32"):
        check_dtype("gpt2", torch.float64)


def test_t5_overflows_float16_where_transformers_clamps(tmp_path):
    """Why T5 in float16 is refused: with a feed-forward output past float16's range (wo scaled up, as in large
    T5 checkpoints), transformers' float16 T5 (wo kept in float32, block outputs clamped) stays finite, while
    the same weights cast to float16 without those guards, zoo's blocks, overflow to inf / NaN: raised as
    Float16Overflow, never returned."""
    hf32 = tiny_t5()
    with torch.no_grad():
        for block in hf32.encoder.block:
            block.layer[-1].DenseReluDense.wo.weight.mul_(3e4)
    hf32.save_pretrained(tmp_path)
    f = logits_fn(hf32)
    hf16 = type(hf32).from_pretrained(tmp_path, dtype=torch.float16).eval()
    zoo16 = zhf.from_hf(tmp_path)[0].half()  # what a refused dtype=torch.float16 would give
    with torch.no_grad():
        assert f(hf16, False).isfinite().all()
        with pytest.raises(Float16Overflow, match="t5 model's lm_head output is not finite"):
            f(zoo16, True)  # the unguarded blocks overflow: raised, not returned


def test_init_from_a_t5_in_float16_training_is_refused(tmp_path):
    """model.init_from an HF T5 with trainer.precision=16-mixed is refused before any data work, naming why;
    bf16-mixed is accepted."""
    from zoo_run import make_cfg

    from zoo.interop.init_from import InitFromError, init_source

    tiny_t5().save_pretrained(tmp_path / "t5")
    over = ["task=lm", "data=tiny_shakespeare", f"model.init_from={tmp_path / 't5'}"]
    with pytest.raises(
        InitFromError, match=r"trainer\.precision=16-mixed: Hugging Face t5 does not run in torch\.float16"
    ):
        init_source(make_cfg(tmp_path / "a", [*over, "trainer.precision=16-mixed"], arch="encoder_decoder"))
    source = init_source(make_cfg(tmp_path / "b", [*over, "trainer.precision=bf16-mixed"], arch="encoder_decoder"))
    assert source["checkpoint"].family == "t5"

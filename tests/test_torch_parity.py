"""zoo's layers, stacks and encoder-decoder loaded with torch.nn.Transformer weights give its outputs."""

import itertools

import pytest
import torch
from torch import nn

from zoo.model import EncoderDecoder, ModelConfig
from zoo.model.blocks import masks
from zoo.model.blocks.attention import AttentionInputs
from zoo.model.blocks.layer import DecoderLayer, EncoderLayer
from zoo.model.blocks.stack import Decoder, Encoder
from zoo.model.convert import from_torch_transformer

D, H, F, B, S, T = 32, 4, 64, 3, 7, 5
TOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
OPTIONS = list(itertools.product([False, True], ["relu", "gelu"], [True, False], [True, False]))


def cfg_for(norm_first, activation, bias, final_norm=False, n_layers=2):
    return ModelConfig(
        d_model=D,
        n_heads=H,
        d_ff=F,
        n_layers=n_layers,
        dropout=0.0,
        activation=activation,
        bias=bias,
        norm_first=norm_first,
        final_norm=final_norm,
        position="none",
        scale_embeddings=False,
        vocab_size=50,
    )


def torch_kwargs(norm_first, activation, bias, batch_first):
    return dict(
        d_model=D,
        nhead=H,
        dim_feedforward=F,
        dropout=0.0,
        activation=activation,
        bias=bias,
        norm_first=norm_first,
        batch_first=batch_first,
    )


def inputs(batch_first):
    g = torch.Generator().manual_seed(0)
    src = torch.randn(B, S, D, generator=g)
    tgt = torch.randn(B, T, D, generator=g)
    src_pad = torch.zeros(B, S, dtype=torch.bool)
    src_pad[0, -2:] = True
    src_pad[2, -4:] = True
    return src, tgt, src_pad


def tb(x, batch_first):
    """zoo is batch-first; torch's layer may be sequence-first."""
    return x if batch_first else x.transpose(0, 1)


def close(a, b):
    return (a - b).abs().max().item()


@pytest.mark.parametrize("norm_first,activation,bias,batch_first", OPTIONS)
@pytest.mark.parametrize("use_pad", [False, True])
def test_encoder_layer_and_stack(norm_first, activation, bias, batch_first, use_pad):
    torch.manual_seed(0)
    src, _, src_pad = inputs(batch_first)
    pad = src_pad if use_pad else None
    ref_layer = nn.TransformerEncoderLayer(**torch_kwargs(norm_first, activation, bias, batch_first)).eval()
    ours = EncoderLayer(cfg_for(norm_first, activation, bias)).eval()
    ours.load_state_dict(from_torch_transformer(ref_layer.state_dict()))
    with torch.no_grad():
        want = tb(ref_layer(tb(src, batch_first), src_key_padding_mask=pad), batch_first)
        got = ours(src, attn=AttentionInputs(mask=masks.padding(pad) if use_pad else None))
    keep = ~src_pad if use_pad else torch.ones(B, S, dtype=torch.bool)
    assert close(got[keep], want[keep]) <= TOL

    norm = nn.LayerNorm(D, bias=bias)
    ref = nn.TransformerEncoder(ref_layer, num_layers=2, norm=norm, enable_nested_tensor=False).eval()
    ours = Encoder(cfg_for(norm_first, activation, bias, final_norm=True), 2).eval()
    ours.load_state_dict(from_torch_transformer(ref.state_dict()))
    with torch.no_grad():
        want = tb(ref(tb(src, batch_first), src_key_padding_mask=pad), batch_first)
        got = ours(src, attn=AttentionInputs(mask=masks.padding(pad) if use_pad else None))
    assert close(got[keep], want[keep]) <= TOL


@pytest.mark.parametrize("norm_first,activation,bias,batch_first", OPTIONS)
def test_encoder_causal_mask(norm_first, activation, bias, batch_first):
    torch.manual_seed(1)
    src, _, _ = inputs(batch_first)
    ref = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(**torch_kwargs(norm_first, activation, bias, batch_first)),
        num_layers=2,
        enable_nested_tensor=False,
    ).eval()
    ours = Encoder(cfg_for(norm_first, activation, bias), 2).eval()
    ours.load_state_dict(from_torch_transformer(ref.state_dict()))
    causal = nn.Transformer.generate_square_subsequent_mask(S)
    with torch.no_grad():
        want = tb(ref(tb(src, batch_first), mask=causal, is_causal=True), batch_first)
        got_fast = ours(src, attn=AttentionInputs(is_causal=True))  # SDPA's is_causal path
        got_mask = ours(src, attn=AttentionInputs(mask=masks.causal(S)))  # explicit bool mask
    assert close(got_fast, want) <= TOL
    assert close(got_mask, want) <= TOL


@pytest.mark.parametrize("norm_first,activation,bias,batch_first", OPTIONS)
@pytest.mark.parametrize("use_pad", [False, True])
def test_decoder_layer_and_stack(norm_first, activation, bias, batch_first, use_pad):
    torch.manual_seed(2)
    src, tgt, src_pad = inputs(batch_first)
    memory = src
    mem_pad = src_pad if use_pad else None
    causal = nn.Transformer.generate_square_subsequent_mask(T)
    ref_layer = nn.TransformerDecoderLayer(**torch_kwargs(norm_first, activation, bias, batch_first)).eval()
    ours = DecoderLayer(cfg_for(norm_first, activation, bias)).eval()
    ours.load_state_dict(from_torch_transformer(ref_layer.state_dict()))
    mem_mask = masks.padding(mem_pad) if use_pad else None
    with torch.no_grad():
        want = tb(
            ref_layer(
                tb(tgt, batch_first),
                tb(memory, batch_first),
                tgt_mask=causal,
                tgt_is_causal=True,
                memory_key_padding_mask=mem_pad,
            ),
            batch_first,
        )
        got = ours(tgt, attn=AttentionInputs(is_causal=True), memory=memory, memory_mask=mem_mask)
    assert close(got, want) <= TOL

    ref = nn.TransformerDecoder(ref_layer, num_layers=2, norm=nn.LayerNorm(D, bias=bias)).eval()
    ours = Decoder(cfg_for(norm_first, activation, bias, final_norm=True), 2).eval()
    ours.load_state_dict(from_torch_transformer(ref.state_dict()))
    with torch.no_grad():
        want = tb(
            ref(
                tb(tgt, batch_first),
                tb(memory, batch_first),
                tgt_mask=causal,
                tgt_is_causal=True,
                memory_key_padding_mask=mem_pad,
            ),
            batch_first,
        )
        got = ours(tgt, attn=AttentionInputs(mask=masks.causal(T)), memory=memory, memory_mask=mem_mask)
    assert close(got, want) <= TOL


@pytest.mark.parametrize("norm_first,activation,bias,batch_first", OPTIONS)
def test_full_encoder_decoder(norm_first, activation, bias, batch_first):
    """nn.Transformer (always with final encoder and decoder norms) vs zoo's EncoderDecoder with the same
    weights: the same embeddings in, the same logits out, with every padding mask."""
    torch.manual_seed(3)
    ref = nn.Transformer(
        num_encoder_layers=2, num_decoder_layers=2, **torch_kwargs(norm_first, activation, bias, batch_first)
    ).eval()
    model = EncoderDecoder(cfg_for(norm_first, activation, bias, final_norm=True)).eval()
    missing, unexpected = model.load_state_dict(from_torch_transformer(ref.state_dict()), strict=False)
    assert not unexpected and all(k.startswith(("src_embed", "tgt_embed", "lm_head")) for k in missing)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, 50, (B, S), generator=g)
    tgt = torch.randint(3, 50, (B, T), generator=g)
    src_pad = torch.zeros(B, S, dtype=torch.bool)
    src_pad[1, -3:] = True
    tgt_pad = torch.zeros(B, T, dtype=torch.bool)
    tgt_pad[2, -2:] = True
    with torch.no_grad():
        e_src = model.src_embed.tok(src)
        e_tgt = model.tgt_embed.tok(tgt)
        out = ref(
            tb(e_src, batch_first),
            tb(e_tgt, batch_first),
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(T),
            tgt_is_causal=True,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
        )
        want = model.lm_head(tb(out, batch_first))
        got = model(src, tgt, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad)
    keep = ~tgt_pad
    assert close(got[keep], want[keep]) <= TOL


def test_converter_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unexpected key"):
        from_torch_transformer({"encoder.layers.0.foo.weight": torch.zeros(1), "bar": torch.zeros(1)})

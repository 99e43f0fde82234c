"""The decoder-only contenders: zoo's DecoderOnly, a GPT built from nn.TransformerEncoder, Hugging Face's
GPT2LMHeadModel and x-transformers' TransformerWrapper, all at one LMShape; the timed LM batch."""

import torch
from torch import nn

from zoo.bench.contenders import Contender, import_error, quiet_transformers
from zoo.bench.shapes import LMShape
from zoo.bench.steps import random_tokens
from zoo.bench.torch_models import TorchGPT
from zoo.model import DecoderOnly, ModelConfig
from zoo.model.loss.chunked_ce import lm_head_cross_entropy


def zoo_lm_config(s: LMShape, max_len: int | None = None) -> ModelConfig:
    """zoo's GPT: pre-LN, GELU (exact), learned positions, tied embeddings, no bias, dropout 0, causal
    (SDPA's is_causal, no mask tensor), GPT-2 init."""
    return ModelConfig(
        vocab_size=s.vocab,
        d_model=s.d_model,
        n_heads=s.n_heads,
        d_ff=4 * s.d_model,
        n_layers=s.n_layers,
        dropout=0.0,
        activation="gelu",
        bias=False,
        norm_first=True,
        position="learned",
        max_len=max_len or s.block,
        tie_embeddings=True,
        scale_embeddings=False,
        init="gpt2",
    )


def hf_gpt2_config(s: LMShape, max_len: int | None = None):
    """transformers.GPT2Config at shape s: dropout 0, exact GELU, tied head, SDPA attention, no BOS / EOS
    (GPT-2's 50256 lies outside small vocabularies, and generate must not stop early), pad id 0."""
    from transformers import GPT2Config

    return GPT2Config(
        n_embd=s.d_model,
        n_layer=s.n_layers,
        n_head=s.n_heads,
        n_inner=4 * s.d_model,
        n_positions=max_len or s.block,
        vocab_size=s.vocab,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        activation_function="gelu",
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
        attn_implementation="sdpa",
    )


def hf_gpt2(s: LMShape, max_len: int | None = None) -> nn.Module:
    """transformers.GPT2LMHeadModel(hf_gpt2_config(s, max_len)), with its own initialisation."""
    quiet_transformers()
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel(hf_gpt2_config(s, max_len))


def xt_decoder(s: LMShape, max_len: int | None = None) -> nn.Module:
    """x_transformers.TransformerWrapper(attn_layers=Decoder(...)) at shape s: pre-LN (its default),
    GELU feed-forward x4 without biases, attention without biases on SDPA (attn_flash=True), head width
    d_model / heads (its default is 64), learned absolute positions, tied head, dropout 0."""
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(
        num_tokens=s.vocab,
        max_seq_len=max_len or s.block,
        tie_embedding=True,
        attn_layers=Decoder(
            dim=s.d_model,
            depth=s.n_layers,
            heads=s.n_heads,
            attn_dim_head=s.d_model // s.n_heads,
            attn_flash=True,
            ff_mult=4,
            ff_no_bias=True,
        ),
    )


HF_GPT2_NOTE = (
    "biases in every Linear and LayerNorm (GPT-2 has no switch for them: +11 d_model per layer "
    "+ d_model); Conv1D projections (addmm); GELU set to exact ('gelu'; GPT-2's default is the tanh "
    "approximation); its own N(0, 0.02) init (zoo's gpt2 init copies it)"
)
XT_NOTE = (
    "separate Q, K, V projections (3 GEMMs where zoo has one fused); LayerNorm = bias-free layer_norm "
    "then x gamma (one more elementwise op); position embedding scaled by d_model^-0.5; its own init "
    "(Kaiming-normal token embedding)"
)
TORCH_GPT_NOTE = (
    "same architecture and parameter count; causal by a float mask passed with is_causal=True "
    "(nn.MultiheadAttention then takes SDPA's causal path); zoo's gpt2 init"
)


def lm_contenders(s: LMShape, max_len: int | None = None, peers: bool = True) -> list[Contender]:
    """zoo DecoderOnly, torch TransformerEncoder (TorchGPT), and with peers=True HF GPT2LMHeadModel and
    x-transformers TransformerWrapper, all at shape s (max_len: position table length, default s.block).
    forward(model, idx (B, T)) -> logits (B, T, vocab)."""
    max_len = max_len or s.block
    out = [
        Contender(
            "zoo DecoderOnly",
            lambda: DecoderOnly(zoo_lm_config(s, max_len)),
            lambda m, x: m(x),
            loss=lambda m, x, y: lm_head_cross_entropy(m.lm_head, m.features(x)[0], y),
        ),
        Contender(
            "torch TransformerEncoder",
            lambda: TorchGPT(s.vocab, s.d_model, s.n_heads, s.n_layers, max_len),
            lambda m, x: m(x),
            TORCH_GPT_NOTE,
        ),
    ]
    if peers:
        out.append(
            Contender(
                "HF GPT2LMHeadModel",
                lambda: hf_gpt2(s, max_len),
                lambda m, x: m(input_ids=x, use_cache=False).logits,
                HF_GPT2_NOTE,
                import_error("transformers"),
                # HF's own loss: labels shifted inside, T - 1 positions
                loss=lambda m, x, y: m(input_ids=x, labels=x, use_cache=False).loss,
            )
        )
        out.append(
            Contender(
                "x-transformers TransformerWrapper",
                lambda: xt_decoder(s, max_len),
                lambda m, x: m(x),
                XT_NOTE,
                import_error("x_transformers"),
            )
        )
    return out


def lm_batch(s: LMShape, device: str = "cpu") -> tuple[tuple, torch.Tensor]:
    """The timed LM batch at shape s: inputs (idx (batch, block),) and targets (batch, block), seeded token ids."""
    return (
        (random_tokens((s.batch, s.block), s.vocab, device, seed=1),),
        random_tokens((s.batch, s.block), s.vocab, device, seed=2),
    )

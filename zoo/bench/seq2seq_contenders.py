"""The encoder-decoder contenders: zoo's EncoderDecoder, nn.Transformer with embeddings and a tied head, and
Hugging Face's MarianMTModel, all at one Seq2SeqShape; the timed seq2seq batch."""

import torch
from torch import nn

from zoo.bench.contenders import Contender, import_error, quiet_transformers
from zoo.bench.shapes import Seq2SeqShape
from zoo.bench.steps import random_tokens
from zoo.bench.torch_models import TorchSeq2Seq
from zoo.model import EncoderDecoder, ModelConfig
from zoo.model.loss.chunked_ce import lm_head_cross_entropy


def zoo_seq2seq_config(s: Seq2SeqShape) -> ModelConfig:
    """zoo's paper Transformer: post-LN, ReLU, sinusoidal positions, embeddings x sqrt(d_model), biases,
    a final LayerNorm after each stack (as nn.Transformer), separate source / target embeddings with the
    head tied to the target one, dropout 0 (the paper: 0.1; off for timing), Xavier init."""
    return ModelConfig(
        vocab_size=s.vocab,
        d_model=s.d_model,
        n_heads=s.n_heads,
        d_ff=s.d_ff,
        n_layers=s.n_layers,
        dropout=0.0,
        activation="relu",
        norm_first=False,
        final_norm=True,
        bias=True,
        position="sinusoidal",
        max_len=max(s.src_len, s.tgt_len),
        scale_embeddings=True,
        tie_embeddings=True,
        init="xavier",
    )


def hf_marian(s: Seq2SeqShape) -> nn.Module:
    """transformers.MarianMTModel at shape s: post-LN, ReLU, sinusoidal positions, scaled embeddings,
    separate source / target embeddings (share_encoder_decoder_embeddings=False), head tied to the target
    embedding, dropout 0, SDPA attention; pad / decoder start id 0, BOS 1, EOS 2."""
    quiet_transformers()
    from transformers import MarianConfig, MarianMTModel

    cfg = MarianConfig(
        vocab_size=s.vocab,
        d_model=s.d_model,
        encoder_layers=s.n_layers,
        decoder_layers=s.n_layers,
        encoder_attention_heads=s.n_heads,
        decoder_attention_heads=s.n_heads,
        encoder_ffn_dim=s.d_ff,
        decoder_ffn_dim=s.d_ff,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        activation_function="relu",
        max_position_embeddings=max(s.src_len, s.tgt_len),
        scale_embedding=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=0,
        share_encoder_decoder_embeddings=False,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    return MarianMTModel(cfg)


TORCH_SEQ2SEQ_NOTE = "same architecture and parameter count; target causal mask as a float tensor with tgt_is_causal"
MARIAN_NOTE = (
    "no final LayerNorm after either stack (zoo and nn.Transformer have one: -4 d_model params); "
    "separate Q, K, V projections; a final_logits_bias buffer added to the logits; sinusoidal "
    "positions in a frozen Embedding (not counted); its own N(0, 0.02) init"
)


def seq2seq_contenders(s: Seq2SeqShape, peers: bool = True) -> list[Contender]:
    """zoo EncoderDecoder, torch nn.Transformer (TorchSeq2Seq), and with peers=True HF MarianMTModel, all
    at shape s. forward(model, src (B, S), tgt (B, T)) -> logits (B, T, vocab)."""
    max_len = max(s.src_len, s.tgt_len)
    out = [
        Contender(
            "zoo EncoderDecoder",
            lambda: EncoderDecoder(zoo_seq2seq_config(s)),
            lambda m, x, y: m(x, y),
            loss=lambda m, x, y, t: lm_head_cross_entropy(m.lm_head, m.decode_features(y, m.encode(x))[0], t),
        ),
        Contender(
            "torch nn.Transformer",
            lambda: TorchSeq2Seq(s.vocab, s.d_model, s.n_heads, s.d_ff, s.n_layers, max_len),
            lambda m, x, y: m(x, y),
            TORCH_SEQ2SEQ_NOTE,
        ),
    ]
    if peers:
        out.append(
            Contender(
                "HF MarianMTModel",
                lambda: hf_marian(s),
                lambda m, x, y: m(input_ids=x, decoder_input_ids=y, use_cache=False).logits,
                MARIAN_NOTE,
                import_error("transformers"),
                loss=lambda m, x, y, t: m(input_ids=x, decoder_input_ids=y, labels=t, use_cache=False).loss,
            )
        )
    return out


def seq2seq_batch(s: Seq2SeqShape, device: str = "cpu") -> tuple[tuple, torch.Tensor]:
    """The timed seq2seq batch at shape s: inputs (src (batch, src_len), tgt (batch, tgt_len)) and targets
    (batch, tgt_len), seeded token ids."""
    return (
        (
            random_tokens((s.batch, s.src_len), s.vocab, device, seed=1),
            random_tokens((s.batch, s.tgt_len), s.vocab, device, seed=2),
        ),
        random_tokens((s.batch, s.tgt_len), s.vocab, device, seed=3),
    )

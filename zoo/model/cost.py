"""Analytic cost model of zoo's Transformers: parameters, forward / training FLOPs, activation memory.

FLOPs count 2 per multiply-add of every matrix product the forward pass runs (the convention of
Kaplan et al. 2020, "Scaling Laws for Neural Language Models", sec. 2.1, and of Narayanan et al. 2021,
"Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", whose FLOP count
for a layer's forward pass is 24*B*s*h^2 + 4*B*s^2*h, i.e. 24*b*N*d^2 + 4*b*N^2*d here).
Norms, softmax, activations, RoPE rotations, ALiBi / mask construction, bias additions and embedding
lookups are ignored: they are O(b*N*d) or O(b*h*N^2) element-wise work, negligible next to the matmuls
and not counted by that formula (nor by torch.utils.flop_counter.FlopCounterMode).

Checked against FlopCounterMode in tests/test_cost.py: exact for every architecture and block option.
On CPU, FlopCounterMode has no formula for aten._scaled_dot_product_flash_attention_for_cpu (torch 2.13),
so a plain counter misses the attention products (scores + values); register torch's sdpa_flop_count
for that op through custom_mapping, or run with return_attention=True (explicit matmuls).

Notation: b = batch size, N = query length (tokens), N_k = key length (tokens), S = encoder / memory
length (tokens), d = d_model = n_heads * d_head, kv_dim = n_kv_heads * d_head, d_ff, V = vocab_size.
Attention is counted dense (all N x N_k scores): SDPA and FlopCounterMode compute / count the full
matrices, so causal, prefix and sliding-window masks do not reduce the count.
"""

import operator

from torch import nn

from zoo.model.blocks.embedding import Embedding
from zoo.model.blocks.heads import LMHead
from zoo.model.config import GATED_ACTIVATIONS, ModelConfig
from zoo.model.decoder_only import DecoderOnly
from zoo.model.encoder_decoder import EncoderDecoder
from zoo.model.encoder_only import EncoderOnly

LAYER_TERMS = (
    "attention_qkv",
    "attention_scores",
    "attention_values",
    "attention_out",
    "cross_q",
    "cross_kv",
    "cross_scores",
    "cross_values",
    "cross_out",
    "ffn",
)
TERMS = LAYER_TERMS + ("logits",)


def param_count(model: nn.Module) -> int:
    """Number of parameters (scalars): sum(p.numel() for p in model.parameters()).

    Tied weights (tie_embeddings: LM head = target embedding; share_embeddings) are counted once,
    because Module.parameters() yields each Parameter once. Buffers (sinusoidal tables, RoPE tables,
    ALiBi slopes) are not parameters and are not counted.
    """
    return sum(p.numel() for p in model.parameters())


def non_embedding_param_count(model: nn.Module) -> int:
    """Parameters outside the vocabulary and position tables: param_count(model) minus every parameter of an
    Embedding (tokens, learned positions, token types, its norm) and of the output projection to the vocabulary
    (the model's `lm_head`, a plain nn.Linear or an LMHead with its transform and bias), tied to the token table
    or not (Kaplan et al. 2020, sec. 2.1: N excludes the vocabulary and positional embeddings, which make the
    laws cleaner at small sizes). So N does not change with vocab_size or model.tie_embeddings. Tied weights are
    counted once."""
    heads = [m for m in model.modules() if isinstance(m, (Embedding, LMHead))]
    head = getattr(model, "lm_head", None)
    if isinstance(head, nn.Module):
        heads.append(head)
    vocab = {id(p) for m in heads for p in m.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in vocab)


def _check_len(name: str, value: int) -> int:
    try:
        n = operator.index(value)  # int, numpy / torch integer scalars
    except TypeError:
        n = None
    if n is None or isinstance(value, bool) or n < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return n


def layer_flops(cfg: ModelConfig, batch_size: int, seq_len: int, memory_len: int | None = None) -> dict[str, int]:
    """Forward FLOPs of ONE layer, by term (dict over LAYER_TERMS, ints).

    Self-attention over seq_len queries and seq_len keys (N_k = N); with memory_len = S, also
    cross-attention (Q from the N decoder tokens, K/V from the S memory tokens), as DecoderLayer
    with cross_attention; memory_len None = no cross-attention (encoder layer, decoder-only layer).

      attention_qkv    = 2*b*N*d*(d + 2*kv_dim)   fused Q, K, V projection (qkv_proj)
      attention_scores = 2*b*N*N_k*d              Q K^T over all n_heads query heads (GQA shares K,
                                                  but every query head still does its own product)
      attention_values = 2*b*N*N_k*d              softmax(.) V
      attention_out    = 2*b*N*d*d                out_proj
      cross_q          = 2*b*N*d*d                q_proj on the decoder tokens
      cross_kv         = 2*b*S*d*(2*kv_dim)       kv_proj on the memory (S tokens, not N)
      cross_scores     = 2*b*N*S*d,  cross_values = 2*b*N*S*d,  cross_out = 2*b*N*d*d
      ffn              = 2*b*N*d*d_ff*2           relu / gelu: d -> d_ff -> d
                       = 2*b*N*d*(2*d_ff) + 2*b*N*d_ff*d   swiglu / geglu: d -> [gate; up] 2 d_ff -> d
                                                  (Shazeer 2020, eq. 5-6)

    With n_kv_heads = n_heads, relu / gelu and d_ff = 4d the self-attention + ffn terms sum to
    24*b*N*d^2 + 4*b*N^2*d exactly (Narayanan et al. 2021's 24Bsh^2 + 4Bs^2h; Kaplan et al. 2020,
    table 1; 2 FLOPs per multiply-add, forward only).
    """
    b, N = _check_len("batch_size", batch_size), _check_len("seq_len", seq_len)
    d = cfg.n_heads * cfg.head_dim  # = d_model (validated divisible)
    kv_dim = cfg.kv_heads * cfg.head_dim
    gated = cfg.activation in GATED_ACTIVATIONS
    out = dict.fromkeys(LAYER_TERMS, 0)
    out["attention_qkv"] = 2 * b * N * d * (d + 2 * kv_dim)
    out["attention_scores"] = 2 * b * N * N * d
    out["attention_values"] = 2 * b * N * N * d
    out["attention_out"] = 2 * b * N * d * d
    if memory_len is not None:
        S = _check_len("memory_len", memory_len)
        out["cross_q"] = 2 * b * N * d * d
        out["cross_kv"] = 2 * b * S * d * (2 * kv_dim)
        out["cross_scores"] = 2 * b * N * S * d
        out["cross_values"] = 2 * b * N * S * d
        out["cross_out"] = 2 * b * N * d * d
    if gated:
        out["ffn"] = 2 * b * N * d * (2 * cfg.d_ff) + 2 * b * N * cfg.d_ff * d
    else:
        out["ffn"] = 2 * b * N * d * cfg.d_ff * 2
    return out


def _stack(cfg: ModelConfig, n_layers: int, batch_size: int, seq_len: int, memory_len: int | None) -> dict[str, int]:
    per_layer = layer_flops(cfg, batch_size, seq_len, memory_len)
    return {k: n_layers * v for k, v in per_layer.items()}


def forward_flops_by_stack(
    model: nn.Module, batch_size: int, seq_len: int, src_len: int | None = None
) -> dict[str, dict[str, int]]:
    """Forward FLOPs of model(...) split by stack: {"encoder": {term: FLOPs summed over its layers},
    "decoder": {...}, "head": {"logits": 2*b*N*d*V}}; a stack the model lacks is absent.

    Inputs as in forward_flops. The encoder of an EncoderDecoder runs on src_len tokens, its decoder on
    seq_len tokens with cross-attention over src_len memory tokens.
    """
    if not isinstance(model, (EncoderOnly, DecoderOnly, EncoderDecoder)):
        raise TypeError(
            f"forward_flops needs a zoo.model EncoderOnly / DecoderOnly / EncoderDecoder, got {type(model).__name__}"
        )
    if src_len is not None and not isinstance(model, EncoderDecoder):
        raise ValueError(f"src_len applies to EncoderDecoder only; {type(model).__name__} has one input length")
    cfg = model.cfg
    b, N = _check_len("batch_size", batch_size), _check_len("seq_len", seq_len)
    out: dict[str, dict[str, int]] = {}
    if isinstance(model, EncoderOnly):
        out["encoder"] = _stack(cfg, len(model.encoder.layers), b, N, None)
    elif isinstance(model, DecoderOnly):
        out["decoder"] = _stack(cfg, len(model.decoder.layers), b, N, None)
    else:
        S = N if src_len is None else _check_len("src_len", src_len)
        out["encoder"] = _stack(cfg, len(model.encoder.layers), b, S, None)
        out["decoder"] = _stack(cfg, len(model.decoder.layers), b, N, S)
    out["head"] = {"logits": 2 * b * N * cfg.d_model * model.lm_head.out_features}
    return out


def forward_flops(model: nn.Module, batch_size: int, seq_len: int, src_len: int | None = None) -> dict[str, int]:
    """Forward FLOPs (2 per multiply-add) of one model(...) call, by term, summed over stacks and layers.

    model: zoo.model EncoderOnly (forward: per-token LM logits; the classifier head of classify() is
    not counted), DecoderOnly, or EncoderDecoder (teacher forcing: encoder on src and decoder on tgt).
    Input: (batch_size, seq_len) token ids; for EncoderDecoder seq_len is the target length and src_len
    the source (memory) length (None = seq_len). Without caching / padding.
    Returns {term: FLOPs} for every term of TERMS (0 when the model has none of it, e.g. cross_* outside
    EncoderDecoder) plus "total" = their sum. Terms: see layer_flops; "logits" = 2*b*N*d*V, the LM head
    over the N output tokens (Kaplan et al. 2020, table 1, "De-embed"). Dense attention: causal / prefix /
    sliding masks do not halve the count (SDPA and FlopCounterMode count the full N x N_k products).
    Raises TypeError for another model type, ValueError for non-positive lengths or src_len on a
    single-input model.
    """
    out = dict.fromkeys(TERMS, 0)
    for terms in forward_flops_by_stack(model, batch_size, seq_len, src_len).values():
        for k, v in terms.items():
            out[k] += v
    out["total"] = sum(out[k] for k in TERMS)
    return out


def batch_flops(
    model: nn.Module, batch_size: int, seq_len: int, src_len: int | None = None, scored: int | None = None
) -> float:
    """Forward FLOPs of one batch at its padded shape: forward_flops(...)["total"], with the LM head counted
    over `scored` output positions (e.g. only the masked ones a masked LM projects) instead of all
    batch_size * seq_len; scored=0 leaves the head out (a classifier's few FLOPs are not counted)."""
    out = forward_flops(model, batch_size, seq_len, src_len)
    if scored is None:
        return float(out["total"])
    return float(out["total"] - out["logits"] + out["logits"] * scored / (batch_size * seq_len))


def flops_per_token(model: nn.Module, seq_len: int, src_len: int | None = None) -> float:
    """Forward FLOPs per token: forward_flops(model, b, seq_len, src_len)["total"] / (b * seq_len)
    (independent of b). Tokens are the seq_len tokens the model outputs logits for; for EncoderDecoder
    the target tokens, so the encoder's cost over src_len tokens is spread over the target tokens.
    Training (forward + backward, no recomputation) costs about 3x this: backward computes gradients
    w.r.t. both activations and weights, 2x forward (Kaplan et al. 2020, sec. 2.1: C ~ 6 N_params per
    token vs 2 N_params forward); see train_flops_per_token.
    """
    seq_len = _check_len("seq_len", seq_len)
    return forward_flops(model, 1, seq_len, src_len)["total"] / seq_len


def classify_flops_per_token(model: nn.Module, seq_len: int) -> float:
    """Forward FLOPs per input token of model.classify(ids (b, seq_len)): no LM head over the vocabulary,
    instead the classifier 2*d*num_classes once per sequence. EncoderOnly / DecoderOnly: their stack over
    seq_len tokens (pooling is not counted); EncoderDecoder: the encoder over the seq_len source tokens
    and the decoder over its single BOS token with cross-attention to them (EncoderDecoder.classify).
    Raises ValueError when the model has no classification head (model.num_classes = 0) or seq_len < 1."""
    if getattr(model, "classifier", None) is None:
        raise ValueError("classify_flops_per_token needs a classification head: build the model with num_classes > 0")
    seq_len = _check_len("seq_len", seq_len)
    if isinstance(model, EncoderDecoder):
        stacks = forward_flops_by_stack(model, 1, 1, src_len=seq_len)
    else:
        stacks = forward_flops_by_stack(model, 1, seq_len)
    body = sum(v for stack, terms in stacks.items() if stack != "head" for v in terms.values())
    classifier = 2 * model.classifier.in_features * model.classifier.out_features
    return (body + classifier) / seq_len


def train_flops_per_token(model: nn.Module, seq_len: int, src_len: int | None = None) -> float:
    """Training FLOPs per token (forward + backward, no activation recomputation) = 3 * flops_per_token
    (Kaplan et al. 2020, sec. 2.1; Narayanan et al. 2021 count 4x because they add the forward
    recomputed by activation checkpointing)."""
    return 3.0 * flops_per_token(model, seq_len, src_len)


def n_layers(model: nn.Module) -> int:
    """Number of Transformer layers: encoder + decoder layers (both stacks for EncoderDecoder)."""
    return sum(len(getattr(model, name).layers) for name in ("encoder", "decoder") if hasattr(model, name))


def activation_memory(model: nn.Module, batch_size: int, seq_len: int) -> int:
    """Activation memory (bytes) stored for the backward pass: l * (34*b*N*d + 5*b*N^2*h).

    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", sec. 4.1,
    "activations memory per layer = sbh(34 + 5as/h)" bytes (their s = our N tokens, h = our d = d_model, a = our h =
    n_heads): 16-bit activations, 1-byte dropout masks, no recomputation, no tensor / sequence
    parallelism. b: batch size, N: seq_len (tokens), l = n_layers(model).
    Simplifications (the closed form, not a measurement): it assumes the standard layer (MHA, d_ff = 4d,
    non-gated FFN, dropout on); for EncoderDecoder l is the sum of both stacks, every layer is taken at
    seq_len tokens and cross-attention's extra activations are ignored; embeddings, the final norm,
    logits and the loss are not included.
    """
    b, N = _check_len("batch_size", batch_size), _check_len("seq_len", seq_len)
    return n_layers(model) * sum(layer_activation_bytes(model.cfg, b, N).values())


def layer_activation_bytes(cfg: ModelConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    """activation_memory's bytes of ONE layer, by the part that stores them (Korthikanti et al. 2022, sec. 4.1,
    16-bit activations, 1-byte dropout masks); they sum to 34*b*N*d + 5*b*N^2*h:

      attention_qkv     = 2*b*N*d            the QKV projection's input
      attention_scores  = 4*b*N*d            Q and K, the inputs of Q K^T
      attention_softmax = 3*b*N^2*h          the softmax output (2 bytes) and its dropout mask (1 byte)
      attention_values  = 2*b*N^2*h + 2*b*N*d   the dropped-out weights and V, the inputs of (.) V
      attention_out     = 3*b*N*d            the output projection's input and its dropout mask
      ffn               = 19*b*N*d           the first linear's input (2), the activation's input (8) and output (8)
                                             at d_ff = 4d, the dropout mask (1)
      norm              = 4*b*N*d            the two Add & Norm inputs, 2*b*N*d each
    """
    b, N = _check_len("batch_size", batch_size), _check_len("seq_len", seq_len)
    d, h = cfg.d_model, cfg.n_heads
    return {
        "attention_qkv": 2 * b * N * d,
        "attention_scores": 4 * b * N * d,
        "attention_softmax": 3 * b * N * N * h,
        "attention_values": 2 * b * N * N * h + 2 * b * N * d,
        "attention_out": 3 * b * N * d,
        "ffn": 19 * b * N * d,
        "norm": 4 * b * N * d,
    }


def summary(model: nn.Module, batch_size: int, seq_len: int, src_len: int | None = None) -> dict:
    """Cost summary of one training step's shapes: {"params": int (parameters),
    "forward_flops": int (FLOPs of one forward on (batch_size, seq_len), src_len for EncoderDecoder),
    "flops_per_token": float (forward FLOPs / token), "train_flops_per_token": float (3x),
    "activation_memory_bytes": int (Korthikanti et al. 2022, sec. 4.1; see activation_memory)}."""
    return {
        "params": param_count(model),
        "forward_flops": forward_flops(model, batch_size, seq_len, src_len)["total"],
        "flops_per_token": flops_per_token(model, seq_len, src_len),
        "train_flops_per_token": train_flops_per_token(model, seq_len, src_len),
        "activation_memory_bytes": activation_memory(model, batch_size, seq_len),
    }

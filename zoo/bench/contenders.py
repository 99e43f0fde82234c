"""Who runs in each comparison: zoo's models and their peers, built at the same shape.

A Contender is a name, a builder and a forward adapter (model, inputs -> logits), so that one training
step (zoo.bench.steps.train_step) drives them all. Third-party peers come from the optional `bench`
extra (pip install -e .[bench]: Hugging Face transformers, x-transformers, versions pinned in
pyproject.toml); where a package does not import, the contender has `missing` set and its table rows say
so. Each peer is matched to zoo as closely as its options allow; what still differs is its `note`.
"""

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from zoo.bench.report import NOT_INSTALLED
from zoo.bench.shapes import LM_SHAPES, SEQ2SEQ_SHAPES, LMShape, Seq2SeqShape
from zoo.bench.steps import initial_loss, random_tokens, train_step
from zoo.bench.torch_models import TorchGPT, TorchSeq2Seq
from zoo.model import DecoderOnly, EncoderDecoder, ModelConfig
from zoo.model.loss.chunked_ce import lm_head_cross_entropy


@dataclass
class Contender:
    """name: the table label. build() -> nn.Module on the CPU (None when `missing`). forward(model,
    *inputs) -> logits (B, T, V) for training: inputs are (idx,) for LMs, (src, tgt) for seq2seq.
    note: how it differs from zoo's model. missing: why it cannot run (package not importable).
    loss(model, *inputs, targets) -> scalar: the contender's own standard training loss (zoo: the chunked
    LM head + cross-entropy of zoo.model.loss.chunked_ce); None = cross-entropy of forward's logits."""

    name: str
    build: Callable[[], nn.Module] | None
    forward: Callable[..., torch.Tensor]
    note: str = ""
    missing: str | None = None
    loss: Callable[..., torch.Tensor] | None = None


def count_params(model: nn.Module) -> int:
    """Trainable parameters, tied weights counted once (frozen tables such as Marian's sinusoidal
    positions are left out: zoo keeps those in buffers)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


_IMPORT_ERRORS: dict[str, str | None] = {}


def import_error(module: str) -> str | None:
    """None if `module` imports, else the NOT_INSTALLED text (ImportError) or the error that broke it."""
    if module not in _IMPORT_ERRORS:
        try:
            importlib.import_module(module)
            _IMPORT_ERRORS[module] = None
        except ImportError:
            _IMPORT_ERRORS[module] = NOT_INSTALLED
        except Exception as e:  # a broken install must not crash the benchmark either
            _IMPORT_ERRORS[module] = f"import failed: {type(e).__name__}: {e}"
    return _IMPORT_ERRORS[module]


def quiet_transformers() -> None:
    """Silence Hugging Face's advisory logs and deprecation warnings (they would fill the report)."""
    import transformers

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    warnings.filterwarnings("ignore", category=UserWarning, module="transformers")


# --------------------------------------------------------------------------------------------------
# decoder-only
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# encoder-decoder
# --------------------------------------------------------------------------------------------------


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


def notes_lines(contenders: list[Contender]) -> list[str]:
    """Markdown bullet lines '- name: note' for the contenders that have a note."""
    return [f"- {c.name}: {c.note}." for c in contenders if c.note]


COMPILED_NOTE = "; every contender compiled alike, torch.compile(model) (the shared loss stays eager)"


def label(name: str, compile: bool) -> str:
    """A contender's table name: `name`, with ' (compiled)' when it runs under torch.compile."""
    return name + (" (compiled)" if compile else "")


def training_steps(
    contenders: list[Contender], inputs: tuple, targets, precision: str, device: str, compile: bool = False
):
    """Build each installed contender from torch.manual_seed(0) and its timed training step on `inputs`
    (idx,) or (src, tgt) against targets (B, T). compile: every contender, zoo's included, runs through
    torch.compile(model) (the whole forward; zoo's model.compile_scope=model also compiles the loss, which
    here stays the shared eager one); names get ' (compiled)'. Compilation happens in the first (warm-up)
    step.
    Returns (steps {name: closure}, params {name: count}, loss0 {name: initial loss, nats},
    missing {name: why it cannot run})."""
    steps, params, loss0, missing = {}, {}, {}, {}
    for c in contenders:
        name = label(c.name, compile)
        if c.missing:
            missing[name] = c.missing
            continue
        torch.manual_seed(0)
        model = c.build().to(device).train()
        params[name] = count_params(model)
        loss0[name] = initial_loss(model, (lambda f: lambda m: f(m, *inputs))(c.forward), targets)
        runs = torch.compile(model) if compile else model
        own = None if c.loss is None else (lambda f, r: lambda m: f(r, *inputs, targets))(c.loss, runs)
        steps[name] = train_step(
            model, (lambda f, r: lambda m: f(r, *inputs))(c.forward, runs), targets, precision, loss_fn=own
        )
    return steps, params, loss0, missing


def lm_batch(s: LMShape, device: str = "cpu") -> tuple[tuple, torch.Tensor]:
    """The timed LM batch at shape s: inputs (idx (batch, block),) and targets (batch, block), seeded token ids."""
    return (
        (random_tokens((s.batch, s.block), s.vocab, device, seed=1),),
        random_tokens((s.batch, s.block), s.vocab, device, seed=2),
    )


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


def comparison(kind: str, shape: str, device: str = "cpu"):
    """kind 'lm' or 'seq2seq' and a shape name of zoo.bench.shapes -> (the shape, its contenders, inputs,
    targets), as the train_step / seq2seq_step benchmarks build them (for the experiments/bench_scripts).
    Raises ValueError for an unknown kind or shape name."""
    shapes = {"lm": LM_SHAPES, "seq2seq": SEQ2SEQ_SHAPES}.get(kind)
    if shapes is None or shape not in shapes:
        known = ", ".join(shapes) if shapes else "lm, seq2seq"
        raise ValueError(f"unknown {'shape ' + repr(shape) if shapes else 'kind ' + repr(kind)}; known: {known}")
    s = shapes[shape]
    if kind == "lm":
        return (s, lm_contenders(s), *lm_batch(s, device))
    return (s, seq2seq_contenders(s), *seq2seq_batch(s, device))

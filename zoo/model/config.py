"""One config object for every model in zoo (nanoGPT's GPTConfig, grown to the three architectures).

Each field is one constructor argument of one block; `conf/model/*.yaml` sets them by name.
"""

import itertools
import math
from dataclasses import dataclass, fields

from zoo.errors import is_number

ACTIVATIONS = ("relu", "gelu", "swiglu", "geglu", "gelu_tanh", "geglu_tanh", "silu")
GATED_ACTIVATIONS = ("swiglu", "geglu", "geglu_tanh")  # FeedForward.linear1 gives [gate; up]
NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "none", "t5_relative")
SINUSOIDAL_LAYOUTS = ("interleaved", "split")
MASKS = ("causal", "bidirectional", "prefix", "sliding")
INITS = ("xavier", "gpt2")
POOLINGS = ("cls", "mean", "last")
COMPILE_SCOPES = ("layers", "model")


@dataclass
class ModelConfig:
    """Hyperparameters of a Transformer. Defaults are the paper's choices at a small size.

    vocab_size: target / only vocabulary (tokens). src_vocab_size: encoder-decoder source vocabulary
        (None = vocab_size).
    d_model, n_heads, d_ff: widths; n_kv_heads: key/value heads (None = n_heads: standard MHA;
        1 = multi-query; between = grouped-query, Ainslie et al. 2023).
    n_layers: layers per stack; n_encoder_layers / n_decoder_layers override it per stack.
    dropout: residual and embedding dropout; attn_dropout: on attention weights (None = dropout,
        as nn.TransformerEncoderLayer).
    activation: relu | gelu | swiglu | geglu (Shazeer 2020) | gelu_tanh (GELU's tanh approximation, GPT-2's
        gelu_new) | geglu_tanh (gated, T5 v1.1's gated-gelu) | silu (Marian's swish).
    norm: layernorm | rmsnorm; norm_eps.
    bias: biases in every Linear and LayerNorm.
    norm_first: pre-LN (Xiong et al. 2020) instead of the paper's post-LN.
    final_norm: a norm after each stack (None = on for pre-LN, off for post-LN).
    position: sinusoidal | learned | rope | alibi | none; max_len: longest sequence (tokens);
        rope_base: RoPE's theta base (Su et al. 2021).
    mask: causal | bidirectional | prefix | sliding (None = the architecture's natural mask);
        prefix_len: bidirectional prefix (tokens) for mask=prefix; window: keys seen by mask=sliding.
    scale_embeddings: multiply token embeddings by sqrt(d_model) (Vaswani et al. 2017, sec. 3.4).
    tie_embeddings: output head shares the decoder's input embedding (Press & Wolf 2017).
    share_embeddings: encoder-decoder source and target share one embedding (needs one vocabulary).
    init: xavier (as nn.Transformer) | gpt2 (Radford et al. 2019).
    position=t5_relative: T5's bucketed relative attention bias (Raffel et al. 2020, sec. 2.1), one
        (rel_buckets, n_heads) table per stack, bidirectional in encoders, causal in decoders;
        rel_max_distance: distances from it on share the last bucket.
    position_offset: learned positions read row position + offset of a (max_len + offset)-row table (BART: 2).
    sinusoidal_layout: interleaved (sin, cos, sin, ...: Vaswani et al. 2017) | split (all sines, then all
        cosines: Marian).
    attn_scale: scale of q k^T (None = 1/sqrt(d_head); T5: 1.0, folded into its init).
    embed_norm: a norm after the embedding sum, before dropout (BERT, BART's layernorm_embedding).
    type_vocab_size: > 0 adds row 0 of a (type_vocab_size, d_model) token-type table to every token (BERT).
    share_tokens: encoder-decoder source and target share the token table only, each keeping its own
        positions and embed_norm (BART); share_embeddings shares the whole embedding.
    lm_head_transform: dense -> activation -> norm before the output projection (BERT's MLM head);
        lm_head_bias: an output bias (BERT, BART / Marian's final_logits_bias); lm_head_scale: multiply the
        states by d_model^-0.5 before it (T5 with tied embeddings).
    decoder_start_id: the encoder-decoder decoder's first input (None = bos_id; BART: eos, Marian / T5: pad).
    num_classes: classes of the classification head that every architecture builds when > 0 (0 = no
        head); pooling: how EncoderOnly pools its states for it (cls | mean | last).
    length_classes: classes of EncoderOnly's target-length head (zoo.model.blocks.heads.LengthHead), built
        when > 0: lengths 0 .. length_classes - 1 (non-autoregressive translation sets it; 0 = no head).
    pad_id, bos_id, eos_id: special token ids, distinct; zoo.run.train takes them from the data's tokenizer (zoo's
        own: 0, 1, 2, zoo.data.bpe; a pretrained tokenizer.json: its own) and refuses an override that differs.
    activation_checkpointing: in training, each encoder / decoder layer keeps only its input and recomputes
        its activations in backward (torch.utils.checkpoint, use_reentrant=False): less memory, one more
        forward per layer; the same loss and gradients.
    compile: read by the training task, not by the model: torch.compile its training forward.
    compile_scope: what compile covers: layers = each encoder / decoder layer's forward, one graph shared by
        all layers of a kind (zoo.tasks.base.compile_layers: compile time does not grow with depth) | model =
        the whole training loss, embeddings to cross-entropy, as one graph, as nanoGPT compiles its model
        (zoo.tasks.base.compile_training_loss: slower to compile, faster steps).
    loss_chunk_size: rows (tokens) per chunk of the fused output projection + cross-entropy
        (zoo.model.loss.chunked_ce.linear_cross_entropy: the (tokens, vocab) logits tensor never exists; same loss and
        gradients): None = automatic (~64 MB of fp32 logits a chunk, at least 512 rows; on CUDA an installed
        liger-kernel may run it), 0 = off (full logits and F.cross_entropy), n > 0 = n rows.
    """

    vocab_size: int = 65
    src_vocab_size: int | None = None
    d_model: int = 128
    n_heads: int = 4
    n_kv_heads: int | None = None
    d_ff: int = 512
    n_layers: int = 4
    n_encoder_layers: int | None = None
    n_decoder_layers: int | None = None
    dropout: float = 0.1
    attn_dropout: float | None = None
    activation: str = "relu"
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    bias: bool = True
    norm_first: bool = False
    final_norm: bool | None = None
    position: str = "sinusoidal"
    max_len: int = 1024
    rope_base: float = 10000.0
    mask: str | None = None
    prefix_len: int = 0
    window: int = 128
    scale_embeddings: bool = True
    tie_embeddings: bool = True
    share_embeddings: bool = False
    init: str = "xavier"
    rel_buckets: int = 32
    rel_max_distance: int = 128
    position_offset: int = 0
    sinusoidal_layout: str = "interleaved"
    attn_scale: float | None = None
    embed_norm: bool = False
    type_vocab_size: int = 0
    share_tokens: bool = False
    lm_head_transform: bool = False
    lm_head_bias: bool = False
    lm_head_scale: bool = False
    decoder_start_id: int | None = None
    num_classes: int = 0
    pooling: str = "mean"
    length_classes: int = 0
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    activation_checkpointing: bool = False
    compile: bool = False
    compile_scope: str = "layers"
    loss_chunk_size: int | None = None

    def __post_init__(self):
        self.validate()

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def encoder_layers(self) -> int:
        return self.n_encoder_layers if self.n_encoder_layers is not None else self.n_layers

    @property
    def decoder_layers(self) -> int:
        return self.n_decoder_layers if self.n_decoder_layers is not None else self.n_layers

    @property
    def use_final_norm(self) -> bool:
        return self.norm_first if self.final_norm is None else self.final_norm

    @property
    def attention_dropout(self) -> float:
        return self.dropout if self.attn_dropout is None else self.attn_dropout

    def validate(self) -> None:
        """Raise ValueError naming the key, the value and what is allowed."""
        self._check_choices()
        self._check_sizes()
        self._check_ranges()
        self._check_ids()

    def _check_choices(self) -> None:
        """Named options among their allowed values, switches true / false."""
        choices = {
            "activation": ACTIVATIONS,
            "norm": NORMS,
            "position": POSITIONS,
            "init": INITS,
            "pooling": POOLINGS,
            "compile_scope": COMPILE_SCOPES,
            "sinusoidal_layout": SINUSOIDAL_LAYOUTS,
        }
        for key, allowed in choices.items():
            value = getattr(self, key)
            if value not in allowed:
                raise ValueError(f"model.{key}={value!r} is unknown; allowed: {', '.join(allowed)}")
        for f in fields(self):
            value = getattr(self, f.name)
            switch = f.type is bool or (f.type == (bool | None) and value is not None)
            if switch and not isinstance(value, bool):
                raise ValueError(f"model.{f.name}={value!r} must be true or false")
        if self.mask is not None and self.mask not in MASKS:
            raise ValueError(f"model.mask={self.mask!r} is unknown; allowed: {', '.join(MASKS)} (or null)")

    def _check_sizes(self) -> None:
        """Sizes and counts positive, and the ones that must divide each other."""
        for key in ("vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, key) < 1:
                raise ValueError(f"model.{key}={getattr(self, key)} must be a positive integer")
        if self.src_vocab_size is not None and self.src_vocab_size < 1:
            raise ValueError(
                f"model.src_vocab_size={self.src_vocab_size} must be a positive integer (or null = vocab_size)"
            )
        for key, value in (
            ("n_layers", self.n_layers),
            ("n_encoder_layers", self.n_encoder_layers),
            ("n_decoder_layers", self.n_decoder_layers),
        ):
            if value is not None and value < 1:
                raise ValueError(
                    f"model.{key}={value} must be >= 1: a stack without layers leaves only the embedding and the "
                    f"head (a bigram model), and an encoder-decoder's target would never see its source"
                )
        if self.d_model % self.n_heads:
            raise ValueError(
                f"model.d_model={self.d_model} is not divisible by model.n_heads={self.n_heads}; "
                f"choose n_heads among the divisors of d_model"
            )
        if self.n_kv_heads is not None and self.n_kv_heads < 1:
            raise ValueError(f"model.n_kv_heads={self.n_kv_heads} must be >= 1 (or null: n_heads)")
        if self.n_kv_heads is not None and self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"model.n_heads={self.n_heads} is not divisible by model.n_kv_heads={self.n_kv_heads}; "
                f"n_kv_heads must divide n_heads (n_kv_heads=null means n_heads)"
            )
        if self.position == "rope" and self.head_dim % 2:
            raise ValueError(
                f"model.position='rope' needs an even head dimension, got d_model/n_heads="
                f"{self.d_model}/{self.n_heads}={self.head_dim}; change d_model or n_heads"
            )

    def _check_ranges(self) -> None:
        """Dropout rates, window, head sizes, loss chunk size, offsets, T5 buckets, attention scale and prefix length
        within their ranges."""
        for key, value in (("rope_base", self.rope_base), ("norm_eps", self.norm_eps)):
            if not is_number(value) or not 0 < value < math.inf:
                raise ValueError(
                    f"model.{key}={value!r} must be a positive, finite number (defaults: rope_base 10000, "
                    f"norm_eps 1e-5)"
                )
        for name, rate in (("dropout", self.dropout), ("attn_dropout", self.attn_dropout)):
            if rate is not None and not (is_number(rate) and 0.0 <= rate < 1.0):
                raise ValueError(f"model.{name}={rate!r} must be in [0, 1): a probability of dropping, below 1")
        if self.mask == "sliding" and self.window < 1:
            raise ValueError(f"model.window={self.window} must be >= 1 for mask='sliding'")
        if self.num_classes < 0:
            raise ValueError(f"model.num_classes={self.num_classes} must be >= 0 (0 = no classification head)")
        if self.length_classes < 0:
            raise ValueError(f"model.length_classes={self.length_classes} must be >= 0 (0 = no length head)")
        if self.loss_chunk_size is not None and (
            isinstance(self.loss_chunk_size, bool)
            or not isinstance(self.loss_chunk_size, int)
            or self.loss_chunk_size < 0
        ):
            raise ValueError(
                f"model.loss_chunk_size={self.loss_chunk_size!r} must be an integer >= 0 (0 = full "
                f"logits, n = rows per chunk) or null (automatic)"
            )
        for key in ("position_offset", "type_vocab_size"):
            if getattr(self, key) < 0:
                raise ValueError(f"model.{key}={getattr(self, key)} must be >= 0")
        if self.rel_buckets < 4 or self.rel_max_distance < self.rel_buckets // 2:
            raise ValueError(
                f"model.rel_buckets={self.rel_buckets} must be >= 4 and model.rel_max_distance="
                f"{self.rel_max_distance} >= rel_buckets / 2 (T5: 32 and 128)"
            )
        if self.attn_scale is not None and not self.attn_scale > 0:
            raise ValueError(f"model.attn_scale={self.attn_scale} must be > 0 (or null = 1/sqrt(d_head))")
        if self.prefix_len < 0:
            raise ValueError(f"model.prefix_len={self.prefix_len} must be >= 0")

    def _check_ids(self) -> None:
        """Special and start ids distinct and in the vocabulary; shared embeddings with one vocabulary."""
        if self.decoder_start_id is not None and not 0 <= self.decoder_start_id < self.vocab_size:
            raise ValueError(
                f"model.decoder_start_id={self.decoder_start_id} is outside the vocabulary "
                f"[0, {self.vocab_size}) (null = bos_id)"
            )
        ids = {"model.pad_id": self.pad_id, "model.bos_id": self.bos_id, "model.eos_id": self.eos_id}
        for (key_a, a), (key_b, b) in itertools.combinations(ids.items(), 2):
            if a == b:  # e.g. pad = eos: the loss would ignore every real EOS, and the model never stops
                raise ValueError(
                    f"{key_a}={a} and {key_b}={b} are the same id; special tokens need distinct ids "
                    f"(the subword tokenizer's are pad 0, bos 1, eos 2)"
                )
        if self.share_tokens and self.src_vocab_size not in (None, self.vocab_size):
            raise ValueError(
                f"model.share_tokens=true needs one vocabulary, but src_vocab_size="
                f"{self.src_vocab_size} != vocab_size={self.vocab_size}; set share_tokens=false"
            )
        if self.share_embeddings and self.src_vocab_size not in (None, self.vocab_size):
            raise ValueError(
                f"model.share_embeddings=true needs one vocabulary, but src_vocab_size="
                f"{self.src_vocab_size} != vocab_size={self.vocab_size}; set share_embeddings=false"
            )

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        """Build from a mapping, rejecting unknown keys with the list of known ones."""
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model keys {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)

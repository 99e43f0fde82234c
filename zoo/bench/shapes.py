"""The model shapes the benchmarks run at."""

from dataclasses import dataclass, replace

from zoo.bench.options import Options


@dataclass(frozen=True)
class LMShape:
    """A decoder-only training shape: layers, heads, d_model, block (tokens), batch, vocab (tokens)."""

    name: str
    n_layers: int
    n_heads: int
    d_model: int
    block: int
    batch: int
    vocab: int

    def describe(self) -> str:
        return (
            f"{self.name}: {self.n_layers} layers, {self.n_heads} heads, d_model {self.d_model}, "
            f"block {self.block}, batch {self.batch}, vocab {self.vocab}"
        )


LM_SHAPES = {
    s.name: s
    for s in [
        LMShape("tiny", 2, 2, 32, 16, 2, 65),  # for tests
        LMShape("nanogpt", 4, 4, 128, 64, 12, 65),  # nanoGPT CPU Shakespeare
        LMShape("gpt2-small-short", 12, 12, 768, 256, 1, 50257),
        LMShape("gpt2-small", 12, 12, 768, 1024, 1, 50257),  # batch 1 on CPU; batch 8 on cuda
    ]
}

CUDA_GPT2_BATCH = 8  # GPT-2 small on cuda: 8 x 1024 tokens a step (~8 GB of AdamW state for 4 models + one step)


def default_lm_shapes(opts: Options) -> list[LMShape]:
    """The train_step / precision shapes of the mode (or opts.shapes). QUICK on CPU: nanogpt only
    (gpt2-small-short takes seconds a step per contender on a 2-core CPU, too long for the budget);
    QUICK on cuda: nanogpt + gpt2-small-short. Full: nanogpt + gpt2-small. On cuda the GPT-2 shapes run at
    batch CUDA_GPT2_BATCH instead of 1. Raises ValueError for an unknown shape name."""
    if opts.shapes:
        unknown = [s for s in opts.shapes if s not in LM_SHAPES]
        if unknown:
            raise ValueError(f"unknown shapes {unknown}; known: {', '.join(LM_SHAPES)}")
        names = opts.shapes
    elif opts.quick:
        names = ["nanogpt"] + (["gpt2-small-short"] if opts.device == "cuda" else [])
    else:
        names = ["nanogpt", "gpt2-small"]
    shapes = [LM_SHAPES[n] for n in names]
    if opts.device == "cuda":
        shapes = [replace(s, batch=CUDA_GPT2_BATCH) if s.name.startswith("gpt2") else s for s in shapes]
    return shapes


@dataclass(frozen=True)
class Seq2SeqShape:
    """An encoder-decoder training shape: layers per stack, heads, d_model, d_ff, vocab (source =
    target), batch, source and target lengths (tokens)."""

    name: str
    n_layers: int
    n_heads: int
    d_model: int
    d_ff: int
    vocab: int
    batch: int
    src_len: int
    tgt_len: int

    def describe(self) -> str:
        return (
            f"{self.n_layers}+{self.n_layers} layers, d_model {self.d_model}, d_ff {self.d_ff}, "
            f"{self.n_heads} heads, vocab {self.vocab}, batch {self.batch} x ({self.src_len} source + "
            f"{self.tgt_len} target) tokens = {self.batch * (self.src_len + self.tgt_len)} tokens a step"
        )


SEQ2SEQ_SHAPES = {
    s.name: s
    for s in [
        Seq2SeqShape("tiny", 1, 2, 32, 64, 97, 2, 8, 8),  # for tests
        Seq2SeqShape("base-quick", 2, 8, 512, 2048, 8000, 8, 32, 32),
        Seq2SeqShape("base", 6, 8, 512, 2048, 8000, 64, 32, 32),  # Vaswani et al. 2017's base model, 4096 tokens
    ]
}

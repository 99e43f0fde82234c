"""Benchmark 3: greedy generation, zoo with its KV cache vs Hugging Face generate vs zoo without cache."""

import inspect
from collections.abc import Callable

import torch
from torch import nn

from zoo.bench.contenders import count_params, import_error
from zoo.bench.lm_contenders import hf_gpt2, zoo_lm_config
from zoo.bench.options import Options
from zoo.bench.report import fmt, fmt_params, markdown_table, progress, ratio, throughput_rows
from zoo.bench.shapes import LMShape
from zoo.bench.steps import random_tokens
from zoo.bench.timing import interleaved, median
from zoo.model import DecoderOnly

GEN_SHAPE = LMShape("nanogpt-1024", 4, 4, 128, 1024, 1, 65)  # nanoGPT's shape with a 1024-token context
HF_NAME = "HF GPT2 generate"
PER_TOKEN_STEPS = 16  # decoding steps in one timed call of part (b)


def hf_cache_of(output) -> object:
    """The cache object of a Hugging Face causal-LM output (`cache` in transformers 5, else
    `past_key_values`)."""
    for attr in ("cache", "past_key_values"):
        cache = getattr(output, attr, None)
        if cache is not None:
            return cache
    raise RuntimeError("the Hugging Face output carries no cache (was use_cache=True passed?)")


def hf_cache_kwarg(model: nn.Module) -> str:
    """The forward keyword that takes a cache: 'cache' (transformers >= 5.x) or 'past_key_values'."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def bench_generate(
    opts: Options,
    shape: LMShape = GEN_SHAPE,
    new: int | None = None,
    contexts: tuple[int, ...] = (64, 512),
    prompt_len: int = 8,
) -> str:
    """Greedy decoding, nanoGPT shape (4 layers, 4 heads, d_model 128, vocab 65) with max_len 1024.

    (a) whole generations: a `prompt_len`-token prompt + `new` new tokens (default 256; QUICK: 64) at
        batch 1 and 16; zoo.generate(temperature=0) with its preallocated KV cache (the reference) vs
        Hugging Face GPT2LMHeadModel.generate(do_sample=False, use_cache=True) at the same shape (when
        installed) vs zoo without cache (re-runs the whole prefix each step). new tokens/s = batch * new / s.
    (b) time per new token (ms) at batch 1 after `contexts` tokens: one token through the model against
        a cache of exactly `context` tokens (zoo: the cache position is rewound between calls; HF: its
        DynamicCache is cropped by one token after each call), vs zoo's uncached forward over context + 1
        tokens. Each timed call runs PER_TOKEN_STEPS steps. With a cache the time should stay ~flat as
        context grows.
    `shape` (tests) replaces GEN_SHAPE; its block is the models' max_len.
    """
    new = new or (64 if opts.quick else 256)
    zoo, hf, hf_missing = _models(opts, shape)
    params = f"zoo {fmt_params(count_params(zoo))}" + (f", HF GPT-2 {fmt_params(count_params(hf))}" if hf else "")
    rows = []
    for batch in (1, 16):
        rows += _whole_generation_rows(opts, zoo, hf, hf_missing, batch, prompt_len, new)
    zoo_ms = {context: _per_token_ms(opts, zoo, hf, context) for context in contexts}
    return _report(opts, shape, params, prompt_len, new, rows, zoo_ms)


def _models(opts: Options, shape: LMShape) -> tuple[DecoderOnly, nn.Module | None, str | None]:
    """(zoo's DecoderOnly, HF's GPT2LMHeadModel or None, why HF is missing or None), both at `shape`,
    max_len = shape.block, in eval mode on opts.device."""
    torch.manual_seed(0)
    zoo = DecoderOnly(zoo_lm_config(shape, shape.block)).to(opts.device).eval()
    hf_missing = import_error("transformers")
    hf = None
    if hf_missing is None:
        torch.manual_seed(0)
        hf = hf_gpt2(shape, shape.block).to(opts.device).eval()
    return zoo, hf, hf_missing


def _whole_generation_rows(
    opts: Options, zoo: DecoderOnly, hf: nn.Module | None, hf_missing: str | None, batch: int, prompt_len: int, new: int
) -> list[list[str]]:
    """Part (a) at one batch size: the table rows of every contender generating `new` tokens after a
    random (batch, prompt_len) prompt. Raises RuntimeError when a contender returns another shape."""
    progress(f"generate batch {batch}")
    idx = random_tokens((batch, prompt_len), zoo.cfg.vocab_size, opts.device, seed=batch)
    contenders: dict[str, Callable[[], object]] = {
        "zoo KV cache": lambda: zoo.generate(idx, new, temperature=0.0, use_cache=True)
    }
    if hf is not None:

        def hf_generate():
            with torch.no_grad():
                return hf.generate(
                    idx,
                    attention_mask=torch.ones_like(idx),
                    max_new_tokens=new,
                    min_new_tokens=new,
                    do_sample=False,
                    use_cache=True,
                    pad_token_id=0,
                )

        contenders[HF_NAME] = hf_generate
    contenders["zoo no cache"] = lambda: zoo.generate(idx, new, temperature=0.0, use_cache=False)
    for name, run in contenders.items():  # every contender makes exactly `new` tokens
        shape_out = tuple(run().shape)
        if shape_out != (batch, prompt_len + new):
            raise RuntimeError(f"{name} returned {shape_out}, expected {(batch, prompt_len + new)}")
    times = interleaved(contenders, opts.reps, opts.warmup, opts.device)
    no_loss = {k: float("nan") for k in times}
    table = throughput_rows(f"batch {batch}", times, batch * new, "zoo KV cache", {k: 0 for k in times}, no_loss)
    rows = [[r[0], r[1]] + r[4:] for r in table]  # without the params / loss₀ columns
    if hf_missing:
        rows.append([f"batch {batch}", HF_NAME, hf_missing, "—", "—", "—"])
    return rows


def _per_token_ms(opts: Options, zoo: DecoderOnly, hf: nn.Module | None, context: int) -> dict[str, float]:
    """Part (b) at one context length: ms per new token of each contender, at batch 1."""
    progress(f"generate per-token at context {context}")
    idx = random_tokens((1, context + 1), zoo.cfg.vocab_size, opts.device, seed=context)
    cache = zoo.new_cache(1, context + 1, opts.device)
    with torch.no_grad():
        zoo(idx[:, :context], cache=cache)  # prefill: `context` tokens cached

    def zoo_cached():
        with torch.no_grad():
            for _ in range(PER_TOKEN_STEPS):
                for c in cache.self_attn:
                    c.pos = context  # rewind: every call sees exactly `context` cached tokens
                zoo(idx[:, context:], cache=cache)

    def zoo_uncached():
        with torch.no_grad():
            for _ in range(PER_TOKEN_STEPS):
                zoo(idx)

    steps = {"zoo KV cache": zoo_cached}
    if hf is not None:
        kw = hf_cache_kwarg(hf)
        with torch.no_grad():
            hf_cache = hf_cache_of(hf(input_ids=idx[:, :context], use_cache=True))

        def hf_cached():
            with torch.no_grad():
                for _ in range(PER_TOKEN_STEPS):
                    hf(input_ids=idx[:, context:], use_cache=True, **{kw: hf_cache})
                    hf_cache.crop(-1)  # back to `context` cached tokens

        steps["HF cache"] = hf_cached
    steps["zoo no cache"] = zoo_uncached
    times = interleaved(steps, opts.reps, opts.warmup, opts.device)
    return {k: 1e3 * median(v) / PER_TOKEN_STEPS for k, v in times.items()}


def _report(
    opts: Options,
    shape: LMShape,
    params: str,
    prompt_len: int,
    new: int,
    rows: list[list[str]],
    zoo_ms: dict[int, dict[str, float]],
) -> str:
    """The Markdown section: part (a)'s table `rows` and part (b)'s table of zoo_ms {context: {contender: ms}}."""
    step_rows = _per_token_rows(zoo_ms)
    contexts = list(zoo_ms)
    lo, hi = contexts[0], contexts[-1]
    growth = ", ".join(f"{k} x{zoo_ms[hi][k] / zoo_ms[lo][k]:.2f}" for k in zoo_ms[lo])
    return "\n".join(
        [
            f"## generate: greedy decoding ({shape.n_layers} layers, {shape.n_heads} heads, d_model {shape.d_model}, "
            f"vocab {shape.vocab}, max_len {shape.block})",
            "",
            f"Parameters: {params}. (a) {prompt_len}-token prompt + {new} new tokens, greedy, fp32. tokens/s = "
            "batch x new tokens / s; zoo/peer = zoo-with-KV-cache tokens/s over the contender's (> 1 = the cached "
            "zoo is faster). HF: generate(do_sample=False, use_cache=True, min_new_tokens = max_new_tokens) with "
            "its DynamicCache; its per-step work includes the logits processors and stopping criteria.",
            "",
            markdown_table(
                ["batch", "contender", "ms (median)", "ms (min–max)", "new tokens/s", "zoo/peer"], rows, label_columns=2
            ),
            "",
            f"(b) time per new token at batch 1 (median of {opts.reps} calls of {PER_TOKEN_STEPS} steps each); "
            "zoo/HF = HF ms / zoo ms (> 1 = zoo faster); cache speed-up = zoo no cache / zoo KV cache.",
            "",
            markdown_table(
                [
                    "context (tokens)",
                    "zoo KV cache ms/token",
                    "HF cache ms/token",
                    "zoo no cache ms/token",
                    "zoo/HF",
                    "cache speed-up",
                ],
                step_rows,
            ),
            "",
            f"{hi} vs {lo} tokens of context (flat = x1): {growth}.",
        ]
    )


def _per_token_rows(zoo_ms: dict[int, dict[str, float]]) -> list[list[str]]:
    """Part (b)'s rows: per context, ms per token of zoo with and without KV cache and of HF ("—" without HF),
    zoo/HF and the cache speed-up."""
    step_rows = []
    for context, ms in zoo_ms.items():
        hf_ms = ms.get("HF cache")
        step_rows.append(
            [
                f"{context}",
                fmt(ms["zoo KV cache"]),
                fmt(hf_ms) if hf_ms else "—",
                fmt(ms["zoo no cache"]),
                ratio(hf_ms, ms["zoo KV cache"]) if hf_ms else "—",
                ratio(ms["zoo no cache"], ms["zoo KV cache"]),
            ]
        )
    return step_rows

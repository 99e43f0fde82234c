"""Benchmarks of zoo's models against their PyTorch (and optional third-party) peers.

    python -m zoo.bench [--quick] [--only NAME,...] [--device cpu|cuda] [--precision fp32|bf16]
                        [--shapes NAME,...] [--reps N] [--warmup N] [--threads N] [--out FILE.md]

Benchmarks (names for --only; default: all, in this order):

  train_step    decoder-only LM training step (forward + cross-entropy + backward + AdamW step +
                zero_grad(set_to_none=True)): zoo DecoderOnly vs a GPT built from nn.TransformerEncoder
                (+ Hugging Face GPT2LMHeadModel and x-transformers when installed). tokens/s.
  seq2seq_step  encoder-decoder training step at the paper's base shape: zoo EncoderDecoder vs
                nn.Transformer with embeddings and a tied head. target tokens/s.
  generate      greedy decoding: zoo with its KV cache vs zoo re-running the prefix (+ HF generate when
                installed), whole generations and the time per new token at a short and a long context.
  memory        peak memory (MB) of one forward + backward as the sequence grows: zoo DecoderOnly
                (is_causal, no N x N mask) vs nn.TransformerEncoder with an explicit float causal mask
                vs zoo with explicit attention (return_attention=True, N x N scores stored), next to the
                analytic activation_memory formula (zoo.model.cost).
  overhead      the nanoGPT CPU recipe for K steps: a plain PyTorch loop vs the same under a minimal
                Lightning Trainer (zoo.tasks.lm.LanguageModeling). Wall seconds and overhead %.
  precision     zoo's train_step in fp32 vs under bf16 autocast. tokens/s.

Method (every timing comparison): all contenders live in ONE process, are warmed up first, then run
repetition by repetition in alternating order (A B, B A, ...) so that machine-load drifts hit them
alike; the table reports the median of the repetitions (>= 5). Seeds are fixed (torch.manual_seed).
Ratio columns are zoo / peer throughput, > 1 = zoo faster. `memory` is the exception: each length
runs in its own fresh `python -c` subprocess (peak memory is per process).

--quick (target ~1 minute on a 2-core CPU) uses smaller shapes and fewer steps: see QUICK notes in
each benchmark's docstring. CPU timings need a quiet machine: with other processes running, torch's
worker threads wait for each other and steps get many times slower (the header shows the load average
at the start and warns when it is high). Every run prints one header line (torch version, CPU / GPU
name, threads) and one Markdown section per benchmark; --out also writes them to a file.
"""
import argparse
import contextlib
import copy
import gc
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from zoo.model import DecoderOnly, EncoderDecoder, ModelConfig
from zoo.model.cost import activation_memory
from zoo.model.init import init_weights
from zoo.optim import adamw

REPO = Path(__file__).resolve().parents[1]
MB = 2 ** 20
NOT_INSTALLED = "not installed"


# --------------------------------------------------------------------------------------------------
# timing helpers and output
# --------------------------------------------------------------------------------------------------

class Timed(float):
    """Seconds a contender measured itself (e.g. to leave its set-up out); see `interleaved`."""


def sync(device: str) -> None:
    """Wait for queued GPU work, so that wall-clock time covers it (no-op on CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def interleaved(contenders: Dict[str, Callable[[], object]], reps: int, warmup: int,
                device: str = "cpu") -> Dict[str, List[float]]:
    """Time each contender `reps` times, interleaved: repetition r runs every contender once, in the
    given order for even r and reversed for odd r (A B C, C B A, ...), so slow drifts of the machine
    load are shared. First `warmup` untimed rounds of every contender (allocator, kernels, caches).

    contenders: name -> zero-argument callable. Its wall-clock time (seconds, GPU synchronised before and
    after) is recorded, unless it returns a `Timed`, which is then taken as its own measured seconds.
    Returns name -> list of `reps` durations (seconds), in repetition order.
    """
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    times: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(reps):
        for name in (names if r % 2 == 0 else names[::-1]):
            gc.collect()
            sync(device)
            t0 = time.perf_counter()
            out = contenders[name]()
            sync(device)
            elapsed = time.perf_counter() - t0
            times[name].append(float(out) if isinstance(out, Timed) else elapsed)
    return times


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]], label_columns: int = 1) -> str:
    """A Markdown table, padded to be readable as plain text; cells are str()-ed. The first
    `label_columns` columns are left-aligned, the others (numbers) right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    left = [i < label_columns for i in range(len(headers))]

    def line(row):
        return "| " + " | ".join(c.ljust(w) if lf else c.rjust(w) for c, w, lf in zip(row, widths, left)) + " |"
    sep = "|" + "|".join(":" + "-" * (w + 1) if lf else "-" * (w + 1) + ":" for w, lf in zip(widths, left)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in cells])


def fmt(x: float, digits: int = 3) -> str:
    """A number with `digits` significant digits, no scientific notation for everyday magnitudes."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:,.{decimals}f}"


def ratio(zoo: float, peer: float) -> str:
    """zoo / peer, as a string with 2 decimals."""
    return f"{zoo / peer:.2f}" if peer > 0 else "—"


def device_name(device: str) -> str:
    """The GPU name (cuda) or the CPU model name from /proc/cpuinfo."""
    if device == "cuda":
        return "GPU: " + torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return "CPU: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return "CPU: " + (platform.processor() or platform.machine())


def load_average() -> Optional[float]:
    """The 1-minute load average (runnable processes), None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def header(opts: "Options") -> str:
    """One line: torch version, device name, thread count, mode, precision, the load before the start."""
    mode = "quick" if opts.quick else "full"
    load = load_average()
    line = (f"torch {torch.__version__} | {device_name(opts.device)} | threads {torch.get_num_threads()} "
            f"(of {os.cpu_count()} CPUs) | device {opts.device} | mode {mode} | reps {opts.reps} (median), "
            f"warmup {opts.warmup} | train_step precision {opts.precision}")
    if load is not None:
        line += f" | load avg {load:.2f} at start"
        if opts.device == "cpu" and load >= 0.5 * (os.cpu_count() or 1):
            line += ("\n\n**Warning**: the machine was busy at the start; CPU timings (above all with several "
                     "threads, which wait for each other) are unreliable. Rerun on a quiet machine.")
    return line


def progress(msg: str) -> None:
    """Progress notes go to stderr, so that stdout is the Markdown report only."""
    print(f"[zoo.bench] {msg}", file=sys.stderr, flush=True)


@dataclass
class Options:
    quick: bool = False
    device: str = "cpu"
    precision: str = "fp32"
    reps: int = 7
    warmup: int = 2
    shapes: Optional[List[str]] = None  # train_step / precision shape names; None = the mode's default


# --------------------------------------------------------------------------------------------------
# models: zoo and its peers
# --------------------------------------------------------------------------------------------------

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
        return (f"{self.name}: {self.n_layers} layers, {self.n_heads} heads, d_model {self.d_model}, "
                f"block {self.block}, batch {self.batch}, vocab {self.vocab}")


LM_SHAPES = {s.name: s for s in [
    LMShape("tiny", 2, 2, 32, 16, 2, 65),                   # for tests
    LMShape("nanogpt", 4, 4, 128, 64, 12, 65),              # nanoGPT CPU Shakespeare
    LMShape("gpt2-small-short", 12, 12, 768, 256, 1, 50257),
    LMShape("gpt2-small", 12, 12, 768, 1024, 1, 50257),     # batch 1 on CPU; batch 8 on cuda
]}


def default_lm_shapes(opts: Options) -> List[LMShape]:
    """The train_step / precision shapes of the mode. QUICK on CPU: nanogpt only (gpt2-small-short takes
    ~2-4 s a step per contender on a 2-core CPU, too long for the 1-minute budget); QUICK on cuda:
    nanogpt + gpt2-small-short. Full: nanogpt + gpt2-small (batch 8 on cuda)."""
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
        shapes = [LMShape(s.name, s.n_layers, s.n_heads, s.d_model, s.block, 8, s.vocab)
                  if s.name.startswith("gpt2") else s for s in shapes]
    return shapes


def zoo_lm_config(s: LMShape, max_len: Optional[int] = None) -> ModelConfig:
    """zoo's GPT: pre-LN, GELU, learned positions, tied embeddings, no bias, dropout 0, causal (is_causal)."""
    return ModelConfig(vocab_size=s.vocab, d_model=s.d_model, n_heads=s.n_heads, d_ff=4 * s.d_model,
                       n_layers=s.n_layers, dropout=0.0, activation="gelu", bias=False, norm_first=True,
                       position="learned", max_len=max_len or s.block, tie_embeddings=True,
                       scale_embeddings=False, init="gpt2")


class TorchGPT(nn.Module):
    """The peer of zoo's DecoderOnly built from torch.nn: token + learned position embeddings ->
    nn.TransformerEncoder(pre-LN, GELU, no bias, dropout 0) -> final LayerNorm -> tied LM head.

    forward(idx (B, T)) -> logits (B, T, vocab). The float causal mask
    nn.Transformer.generate_square_subsequent_mask(T) is always passed (cached per length, or built in
    every forward with cache_mask=False, as typical user code does); is_causal=True (default) lets
    nn.MultiheadAttention use SDPA's fused causal path, is_causal=False makes attention use the explicit
    N x N mask. Weights are initialised as zoo's init="gpt2" (N(0, 0.02), scaled residual projections;
    the parameter names match), so both models train in the same numerical regime: with nn.Embedding's
    N(0, 1) default the tied head's logits are huge, the softmax saturates and the backward pass runs on
    denormal numbers, several times slower on CPU.
    """

    def __init__(self, vocab: int, d_model: int, n_heads: int, n_layers: int, max_len: int, is_causal: bool = True,
                 cache_mask: bool = True):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True, bias=False)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model, bias=False)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.is_causal, self.cache_mask = is_causal, cache_mask
        self._masks: Dict[tuple, torch.Tensor] = {}
        init_weights(self, "gpt2", n_layers)

    def causal_mask(self, T: int, device) -> torch.Tensor:
        key = (T, str(device))
        if not self.cache_mask:
            return nn.Transformer.generate_square_subsequent_mask(T, device=device)
        if key not in self._masks:
            self._masks[key] = nn.Transformer.generate_square_subsequent_mask(T, device=device)
        return self._masks[key]

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        x = self.encoder(x, mask=self.causal_mask(T, idx.device), is_causal=self.is_causal)
        return self.head(self.norm(x))


def optional_lm_peers(s: LMShape) -> Dict[str, Optional[Callable[[], nn.Module]]]:
    """Builders of the third-party peers of train_step: name -> zero-argument builder, or None when the
    package is not importable (nothing is installed here)."""
    peers: Dict[str, Optional[Callable[[], nn.Module]]] = {}
    try:
        from transformers import GPT2Config, GPT2LMHeadModel

        def hf():
            # no BOS / EOS: GPT-2's 50256 is outside small vocabularies, and generate must not stop early
            cfg = GPT2Config(n_embd=s.d_model, n_layer=s.n_layers, n_head=s.n_heads, n_positions=s.block,
                             vocab_size=s.vocab, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                             bos_token_id=None, eos_token_id=None)
            return GPT2LMHeadModel(cfg)
        peers["HF GPT2LMHeadModel"] = hf
    except ImportError:
        peers["HF GPT2LMHeadModel"] = None
    try:
        from x_transformers import Decoder, TransformerWrapper

        def xt():
            return TransformerWrapper(num_tokens=s.vocab, max_seq_len=s.block,
                                      attn_layers=Decoder(dim=s.d_model, depth=s.n_layers, heads=s.n_heads))
        peers["x-transformers TransformerWrapper"] = xt
    except ImportError:
        peers["x-transformers TransformerWrapper"] = None
    return peers


def logits_of(out) -> torch.Tensor:
    """Logits from a model output: a tensor (zoo, torch peers, x-transformers) or an object with .logits (HF)."""
    return out if isinstance(out, torch.Tensor) else out.logits


def autocast(device: str, precision: str):
    """torch.autocast to bfloat16 for precision 'bf16', a no-op context for 'fp32'."""
    if precision == "bf16":
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def lm_train_step(model: nn.Module, idx: torch.Tensor, targets: torch.Tensor, precision: str = "fp32",
                  call: Optional[Callable] = None) -> Callable[[], None]:
    """One training step as a closure: forward (under bf16 autocast if precision == 'bf16') ->
    cross-entropy in fp32 -> backward -> AdamW step (zoo.optim.adamw, lr 1e-4) -> zero_grad(set_to_none).
    call(model, *inputs) -> output; default model(idx)."""
    opt = adamw(model, lr=1e-4)
    device = idx.device.type
    call = call or (lambda m, x: m(x))

    def step():
        with autocast(device, precision):
            logits = logits_of(call(model, idx))
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def random_tokens(shape, vocab: int, device: str, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g).to(device)


def throughput_rows(label: str, times: Dict[str, List[float]], tokens: int, zoo_name: str,
                    missing: Sequence[str] = ()) -> List[List[str]]:
    """Table rows: label | contender | median ms | min-max ms | tokens/s | zoo/peer (zoo tokens/s over the
    contender's; > 1 = zoo faster). `missing` contenders get 'not installed' rows."""
    zoo_tps = tokens / median(times[zoo_name])
    rows = []
    for name, ts in times.items():
        m = median(ts)
        rows.append([label, name, fmt(1e3 * m), f"{fmt(1e3 * min(ts))}–{fmt(1e3 * max(ts))}", fmt(tokens / m),
                     "1.00 (ref)" if name == zoo_name else ratio(zoo_tps, tokens / m)])
    rows += [[label, name, NOT_INSTALLED, "—", "—", "—"] for name in missing]
    return rows


THROUGHPUT_HEADERS = ["shape", "contender", "ms (median)", "ms (min–max)", "tokens/s", "zoo/peer"]


# --------------------------------------------------------------------------------------------------
# 1. train_step
# --------------------------------------------------------------------------------------------------

def bench_train_step(opts: Options) -> str:
    """Decoder-only LM training step: tokens/s = batch * block / step seconds (median).

    Contenders (same d_model / heads / layers / vocab / batch / block, dropout 0):
      zoo DecoderOnly (pre-LN, GELU, learned positions, tied head, no bias, causal via is_causal);
      torch TransformerEncoder: TorchGPT (nn.TransformerEncoderLayer(norm_first, gelu, bias=False),
        float causal mask + is_causal=True, final LayerNorm, tied head);
      HF GPT2LMHeadModel and x-transformers TransformerWrapper(Decoder) when installed (note: they have
        biases / untied heads / other details of their own; they are references, not exact twins).
    Step = forward, fp32 cross-entropy, backward, AdamW step, zero_grad(set_to_none=True).
    --precision bf16 runs every contender's forward under torch.autocast(bfloat16).
    QUICK on CPU: nanogpt shape only (see default_lm_shapes).
    """
    sections = []
    rows = []
    for s in default_lm_shapes(opts):
        progress(f"train_step {s.name}")
        torch.manual_seed(0)
        idx = random_tokens((s.batch, s.block), s.vocab, opts.device, seed=1)
        targets = random_tokens((s.batch, s.block), s.vocab, opts.device, seed=2)
        models = {"zoo DecoderOnly": DecoderOnly(zoo_lm_config(s)),
                  "torch TransformerEncoder": TorchGPT(s.vocab, s.d_model, s.n_heads, s.n_layers, s.block)}
        missing = []
        for name, build in optional_lm_peers(s).items():
            if build is None:
                missing.append(name)
            else:
                torch.manual_seed(0)
                models[name] = build()
        steps = {name: lm_train_step(m.to(opts.device).train(), idx, targets, opts.precision)
                 for name, m in models.items()}
        times = interleaved(steps, opts.reps, opts.warmup, opts.device)
        rows += throughput_rows(s.name, times, s.batch * s.block, "zoo DecoderOnly", missing)
        sections.append(s.describe())
        del models, steps
        gc.collect()
    return "\n".join([
        "## train_step: decoder-only LM training step (forward + backward + AdamW)",
        "",
        f"Shapes: {'; '.join(sections)}. Precision: {opts.precision}"
        f"{' (bf16 autocast on every contender forward)' if opts.precision == 'bf16' else ''}. "
        "tokens/s = batch x block / step time; zoo/peer = zoo tokens/s / peer tokens/s (> 1 = zoo faster).",
        "",
        markdown_table(THROUGHPUT_HEADERS, rows, label_columns=2)])


# --------------------------------------------------------------------------------------------------
# 2. seq2seq_step
# --------------------------------------------------------------------------------------------------

class TorchSeq2Seq(nn.Module):
    """The peer of zoo's EncoderDecoder: src / tgt token embeddings x sqrt(d_model) + sinusoidal positions ->
    nn.Transformer (post-LN, ReLU, dropout 0, batch_first) -> LM head tied to the target embedding.
    forward(src (B, S), tgt (B, T)) -> logits (B, T, vocab); tgt_mask = the float causal mask (cached)
    with tgt_is_causal=True. All weights are initialised Xavier-uniform, as zoo's init="xavier" (and
    nn.Transformer's own reset) — see TorchGPT on why the init matters for CPU timing."""

    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, max_len: int):
        super().__init__()
        self.src_tok = nn.Embedding(vocab, d_model)
        self.tgt_tok = nn.Embedding(vocab, d_model)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe, persistent=False)
        self.transformer = nn.Transformer(d_model, n_heads, n_layers, n_layers, d_ff, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tgt_tok.weight
        self.scale = math.sqrt(d_model)
        self._masks: Dict[tuple, torch.Tensor] = {}
        init_weights(self, "xavier")

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        S, T = src.shape[1], tgt.shape[1]
        key = (T, str(tgt.device))
        if key not in self._masks:
            self._masks[key] = nn.Transformer.generate_square_subsequent_mask(T, device=tgt.device)
        x = self.src_tok(src) * self.scale + self.pe[:S]
        y = self.tgt_tok(tgt) * self.scale + self.pe[:T]
        out = self.transformer(x, y, tgt_mask=self._masks[key], tgt_is_causal=True)
        return self.head(out)


def bench_seq2seq_step(opts: Options) -> str:
    """Encoder-decoder training step (teacher forcing): target tokens/s = batch * tgt_len / step seconds.

    Paper base shape (Vaswani et al. 2017): 6 + 6 layers, d_model 512, d_ff 2048, 8 heads, vocab 8000
    (source and target), batch 64 x 32 source + 32 target tokens (4096 tokens a step).
    QUICK: 2 + 2 layers, batch 8 (32 + 32 tokens per pair).
    Both: post-LN, ReLU, sinusoidal positions, embeddings x sqrt(d_model), tied output head, biases,
    final LayerNorm after each stack (nn.Transformer always has them; zoo: final_norm=True), and
    dropout 0 (the paper uses 0.1; 0 keeps the timing free of RNG work, the same for both).
    """
    layers, batch = (2, 8) if opts.quick else (6, 64)
    S = T = 32
    vocab, d, h, d_ff = 8000, 512, 8, 2048
    progress(f"seq2seq_step {layers}+{layers} layers, batch {batch}")
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=vocab, d_model=d, n_heads=h, d_ff=d_ff, n_layers=layers, dropout=0.0,
                      activation="relu", norm_first=False, final_norm=True, bias=True, position="sinusoidal",
                      max_len=64, scale_embeddings=True, tie_embeddings=True, init="xavier")
    src = random_tokens((batch, S), vocab, opts.device, seed=1)
    tgt = random_tokens((batch, T), vocab, opts.device, seed=2)
    labels = random_tokens((batch, T), vocab, opts.device, seed=3)
    models = {"zoo EncoderDecoder": EncoderDecoder(cfg),
              "torch nn.Transformer": TorchSeq2Seq(vocab, d, h, d_ff, layers, 64)}
    call = lambda m, _: m(src, tgt)  # noqa: E731
    steps = {name: lm_train_step(m.to(opts.device).train(), tgt, labels, "fp32", call) for name, m in models.items()}
    times = interleaved(steps, opts.reps, opts.warmup, opts.device)
    label = f"{layers}+{layers} L, b{batch}"
    rows = throughput_rows(label, times, batch * T, "zoo EncoderDecoder")
    return "\n".join([
        "## seq2seq_step: encoder-decoder training step (forward + backward + AdamW)",
        "",
        f"{layers}+{layers} layers, d_model {d}, d_ff {d_ff}, {h} heads, vocab {vocab}, batch {batch} x "
        f"({S} source + {T} target) tokens; post-LN, ReLU, dropout 0 (the paper trains with 0.1: off here "
        "for timing fairness). tokens/s counts target tokens; zoo/peer > 1 = zoo faster.",
        "",
        markdown_table(THROUGHPUT_HEADERS, rows, label_columns=2)])


# --------------------------------------------------------------------------------------------------
# 3. generate
# --------------------------------------------------------------------------------------------------

def bench_generate(opts: Options) -> str:
    """Greedy decoding with the nanoGPT shape (4 layers, 4 heads, d_model 128, vocab 65) and max_len 1024.

    (a) whole generations: an 8-token prompt + 256 new tokens (QUICK: 64) at batch 1 and 16; zoo with its
        KV cache (the reference) vs zoo without cache (re-runs the whole prefix at every step) and HF
        GPT2LMHeadModel.generate (same shape, its cache) when installed. new tokens/s = batch * new / s.
    (b) time per new token (ms) at batch 1 with 64 and 512 tokens of context: the cached step (one token
        through the model against a KV cache of `context` tokens; the cache is rewound between calls)
        vs the uncached step (a forward over context + 1 tokens). Each timed call runs 16 steps.
    """
    L, h, d, V, max_len, prompt_len = 4, 4, 128, 65, 1024, 8
    new = 64 if opts.quick else 256
    s = LMShape("nanogpt-1024", L, h, d, max_len, 1, V)
    torch.manual_seed(0)
    zoo = DecoderOnly(zoo_lm_config(s, max_len)).to(opts.device).eval()
    peers = optional_lm_peers(s)
    hf = None
    if peers["HF GPT2LMHeadModel"] is not None:
        torch.manual_seed(0)
        hf = peers["HF GPT2LMHeadModel"]().to(opts.device).eval()
    rows = []
    for batch in (1, 16):
        progress(f"generate batch {batch}")
        idx = random_tokens((batch, prompt_len), V, opts.device, seed=batch)
        contenders = {
            "zoo KV cache": lambda: zoo.generate(idx, new, temperature=0.0, use_cache=True),
            "zoo no cache": lambda: zoo.generate(idx, new, temperature=0.0, use_cache=False)}
        if hf is not None:
            def hf_generate(idx=idx):
                with torch.no_grad():
                    return hf.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=new,
                                       do_sample=False, use_cache=True, pad_token_id=0)
            contenders["HF GPT2 generate"] = hf_generate
        times = interleaved(contenders, opts.reps, opts.warmup, opts.device)
        rows += throughput_rows(f"batch {batch}", times, batch * new, "zoo KV cache",
                                [] if hf is not None else ["HF GPT2 generate"])

    inner = 16
    step_rows = []
    zoo_ms = {}
    for context in (64, 512):
        progress(f"generate per-token at context {context}")
        idx = random_tokens((1, context + 1), V, opts.device, seed=context)
        cache = zoo.new_cache(1, context + 1, opts.device)
        with torch.no_grad():
            zoo(idx[:, :context], cache=cache)  # prefill: `context` tokens cached

        def cached_step():
            with torch.no_grad():
                for _ in range(inner):
                    for c in cache.self_attn:
                        c.pos = context  # rewind: every call sees exactly `context` cached tokens
                    zoo(idx[:, context:], cache=cache)

        def uncached_step():
            with torch.no_grad():
                for _ in range(inner):
                    zoo(idx)

        times = interleaved({"zoo KV cache": cached_step, "zoo no cache": uncached_step},
                            opts.reps, opts.warmup, opts.device)
        ms = {k: 1e3 * median(v) / inner for k, v in times.items()}
        zoo_ms[context] = ms
        step_rows.append([f"{context}", fmt(ms["zoo KV cache"]), fmt(ms["zoo no cache"]),
                          ratio(ms["zoo no cache"], ms["zoo KV cache"])])
    flat = zoo_ms[512]["zoo KV cache"] / zoo_ms[64]["zoo KV cache"]
    grow = zoo_ms[512]["zoo no cache"] / zoo_ms[64]["zoo no cache"]
    return "\n".join([
        "## generate: greedy decoding (nanoGPT shape, max_len 1024)",
        "",
        f"(a) {prompt_len}-token prompt + {new} new tokens, greedy. tokens/s = batch x new tokens / s; "
        "zoo/peer = zoo-with-KV-cache tokens/s over the contender's (> 1 = the cached zoo is faster).",
        "",
        markdown_table(["batch", "contender", "ms (median)", "ms (min–max)", "new tokens/s", "zoo/peer"], rows,
                       label_columns=2),
        "",
        f"(b) time per new token at batch 1 (median of {opts.reps} calls of {inner} steps each); "
        "speed-up = no cache / KV cache.",
        "",
        markdown_table(["context (tokens)", "KV cache ms/token", "no cache ms/token", "speed-up"], step_rows),
        "",
        f"512 vs 64 tokens of context: KV cache x{flat:.2f} (flat = ~1), no cache x{grow:.2f}."])


# --------------------------------------------------------------------------------------------------
# 4. memory
# --------------------------------------------------------------------------------------------------

MEMORY_SHAPE = dict(d_model=256, n_heads=4, n_layers=2, vocab=65, batch=1)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm_bytes() -> int:
    """Peak resident set size (VmHWM) of this process, bytes (ru_maxrss if /proc lacks it)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to /proc/self/clear_refs). False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


MEMORY_CONTENDERS = {
    "zoo": "zoo (is_causal)",
    "peer": "torch float mask",
    "zoo-explicit": "zoo return_attention",
}


def measure_peak(kind: str, seq_len: int, device: str, repeats: int = 3) -> Tuple[float, str]:
    """Peak memory growth (bytes) of one training forward + backward of contender `kind` at batch 1 and
    `seq_len` tokens (MEMORY_SHAPE, fp32), measured in this process:
      zoo: DecoderOnly, causal through SDPA's is_causal (no N x N tensor);
      peer: TorchGPT with the float causal mask built in each forward and is_causal=False;
      zoo-explicit: DecoderOnly with return_attention=True (explicit softmax(QK^T) V: stores the
        N x N scores of every head, the path the formula's 5bN^2h term describes).
    One warm-up step first (allocates .grad, which zero_grad(set_to_none=False) keeps, and one-time kernel
    buffers), then `repeats` measured steps; returns (median growth in bytes, method).
    CPU: VmHWM after the step minus RSS before (run_memory_child sets MALLOC_MMAP_THRESHOLD_ so that freed
    tensors go back to the OS); cuda: torch.cuda.max_memory_allocated minus memory_allocated before."""
    m = MEMORY_SHAPE
    torch.manual_seed(0)
    if kind in ("zoo", "zoo-explicit"):
        model = DecoderOnly(zoo_lm_config(LMShape(kind, m["n_layers"], m["n_heads"], m["d_model"], seq_len,
                                                  m["batch"], m["vocab"])))
        forward = (lambda x: model(x, return_attention=True)[0]) if kind == "zoo-explicit" else model
    elif kind == "peer":
        model = TorchGPT(m["vocab"], m["d_model"], m["n_heads"], m["n_layers"], seq_len, is_causal=False,
                         cache_mask=False)
        forward = model
    else:
        raise ValueError(f"memory contender {kind!r} is unknown; known: {', '.join(MEMORY_CONTENDERS)}")
    model.to(device).train()
    idx = random_tokens((m["batch"], seq_len), m["vocab"], device, seed=1)
    targets = random_tokens((m["batch"], seq_len), m["vocab"], device, seed=2)

    def step():
        loss = F.cross_entropy(forward(idx).flatten(0, 1), targets.flatten())
        loss.backward()
        model.zero_grad(set_to_none=False)

    step()
    peaks = []
    method = "cuda max_memory_allocated" if device == "cuda" else "RSS high-water mark (VmHWM)"
    for _ in range(repeats):
        gc.collect()
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            peaks.append(torch.cuda.max_memory_allocated() - base)
        else:
            base = _rss_bytes()
            if not _reset_hwm():
                method = "ru_maxrss growth (imprecise: VmHWM could not be reset)"
                base = _hwm_bytes()
            step()
            peaks.append(max(0, _hwm_bytes() - base))
    return median(peaks), method


def memory_child(seq_len: int, device: str, kinds: Sequence[str], threads: Optional[int] = None) -> dict:
    """Runs inside the fresh subprocess of one length: measure_peak for each contender in `kinds`, one
    after the other (each model is freed before the next is built). threads: torch.set_num_threads
    (None = torch's default). Prints and returns {"peak_bytes": {kind: bytes}, "method": str}."""
    if threads:
        torch.set_num_threads(threads)
    out = {"peak_bytes": {}, "method": ""}
    for kind in kinds:
        out["peak_bytes"][kind], out["method"] = measure_peak(kind, seq_len, device)
        gc.collect()
    print(json.dumps(out))
    return out


def run_memory_child(seq_len: int, device: str, kinds: Sequence[str]) -> dict:
    """memory_child in a fresh `python -c` subprocess (stdout's last line is its JSON)."""
    code = (f"from zoo.bench import memory_child; "
            f"memory_child({seq_len}, {device!r}, {list(kinds)!r}, threads={torch.get_num_threads()})")
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=pythonpath, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="131072")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(REPO))
    if res.returncode != 0:
        raise RuntimeError(f"memory child (N={seq_len}) failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench_memory(opts: Options) -> str:
    """Peak memory (MB) of one training forward + backward at batch 1 as the sequence grows:
    N = 256, 1024, 4096 (QUICK: 256, 512, 1024); d_model 256, 4 heads, 2 layers, vocab 65, fp32.

    zoo DecoderOnly (causal via SDPA's is_causal: no N x N tensor) vs TorchGPT with an explicit float
    causal mask built in every forward (is_causal=False: the N x N float mask is materialised and attention
    takes the masked path; SDPA's fused kernels accept the mask, so the N x N scores are still not stored),
    and zoo with return_attention=True (explicit attention: N x N scores per head, kept for backward).
    Next to them: zoo.model.cost.activation_memory = l * (34*b*N*d + 5*b*N^2*h) bytes (Korthikanti et al.
    2022: 16-bit activations incl. dropout masks and the N x N attention scores/softmax; fp32 doubles it).
    Growth columns: memory at N / memory at the previous N (linear = the length factor).
    Measured in a fresh subprocess per length (memory_child; the contenders one after the other, each
    model freed before the next); the measurement is the growth of the process's peak over its steady
    state (parameters and their .grad excluded).
    """
    lengths = (256, 512, 1024) if opts.quick else (256, 1024, 4096)
    m = MEMORY_SHAPE
    probe = DecoderOnly(zoo_lm_config(LMShape("probe", m["n_layers"], m["n_heads"], m["d_model"], max(lengths),
                                              m["batch"], m["vocab"])))
    series: Dict[str, Dict[int, float]] = {kind: {} for kind in MEMORY_CONTENDERS}
    method = ""
    for N in lengths:
        progress(f"memory N={N}")
        res = run_memory_child(N, opts.device, list(MEMORY_CONTENDERS))
        for kind, peak in res["peak_bytes"].items():
            series[kind][N] = peak / MB
        method = res["method"]
    series["formula"] = {N: activation_memory(probe, m["batch"], N) / MB for N in lengths}

    def growth(values: Dict[int, float], N: int, prev: Optional[int]) -> str:
        return f"x{values[N] / values[prev]:.2f}" if prev is not None and values[prev] > 0 else "—"
    rows = []
    for i, N in enumerate(lengths):
        prev = lengths[i - 1] if i else None
        rows.append([N] + [fmt(series[k][N]) for k in MEMORY_CONTENDERS]
                    + [fmt(series["formula"][N]), fmt(2 * series["formula"][N]), f"x{N / prev:g}" if prev else "—"]
                    + [growth(series[k], N, prev) for k in list(MEMORY_CONTENDERS) + ["formula"]])
    labels = list(MEMORY_CONTENDERS.values())
    headers = (["N (tokens)"] + [f"{label} MB" for label in labels] + ["formula 16-bit MB", "formula fp32 MB"]
               + ["length growth"] + [f"{label} growth" for label in labels + ["formula"]])
    return "\n".join([
        "## memory: peak memory of one training forward + backward vs sequence length",
        "",
        f"Batch 1, d_model {m['d_model']}, {m['n_heads']} heads, {m['n_layers']} layers, vocab {m['vocab']}, fp32. "
        f"Measured: {method}, growth over the steady state in a fresh subprocess per length (median of 3 steps "
        "after a warm-up), MB = 2^20 bytes. Contenders: zoo (is_causal) = DecoderOnly, no N x N tensor; "
        "torch float mask = nn.TransformerEncoder given generate_square_subsequent_mask(N) with is_causal=False "
        "(the N x N mask is materialised; SDPA's fused kernel takes it, so no N x N scores); zoo "
        "return_attention = explicit softmax(QK^T)V storing N x N scores per head. Formula: activation_memory "
        "= l(34bNd + 5bN^2h) bytes for 16-bit activations (fp32 column = 2x): it assumes stored N x N scores "
        "and dropout masks, and ignores embeddings / logits / loss.",
        "",
        markdown_table(headers, rows)])


# --------------------------------------------------------------------------------------------------
# 5. overhead
# --------------------------------------------------------------------------------------------------

NANOGPT_MODEL = dict(d_model=128, n_heads=4, d_ff=512, n_layers=4, dropout=0.0, norm_first=True, activation="gelu",
                     position="learned", tie_embeddings=True, bias=False, scale_embeddings=False, init="gpt2",
                     max_len=64)
NANOGPT_OPTIMIZER = {"lr": 1e-3, "betas": (0.9, 0.99), "weight_decay": 0.1}
WARMUP_STEPS = 10  # steps of each overhead warm-up run


def data_mirror() -> str:
    """$ZOO_DATA_MIRROR, else ../shared/data next to the repository."""
    return os.environ.get("ZOO_DATA_MIRROR") or str(REPO.parent / "shared" / "data")


@contextlib.contextmanager
def quiet_lightning():
    """Silence Lightning's info logs and its advisory warnings (num_workers, etc.) inside the block."""
    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric", "lightning")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def bench_overhead(opts: Options) -> str:
    """The nanoGPT CPU recipe (4/4/128, block 64, batch 12; AdamW lr 1e-3 betas (0.9, 0.99) wd 0.1,
    warmup-cosine schedule, grad-norm clip 1.0) for K steps (QUICK: 50, full: 300), on zoo's
    TinyShakespeare datamodule, two ways:
      plain: a hand-written loop (next batch, forward, fp32 cross-entropy, backward, clip_grad_norm_,
        AdamW step, scheduler step, zero_grad(set_to_none=True));
      Lightning: pl.Trainer(max_steps=K, gradient_clip_val=1.0, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=50, limit_val_batches=0,
        num_sanity_val_steps=0).fit(zoo.tasks.lm.LanguageModeling) (its per-step self.log calls included).
    Timed: plain = the loop; Lightning = Trainer construction + fit. Model and data set-up (reading and
    tokenising the text) are outside both. overhead % = Lightning / plain - 1 (median seconds).
    Warm-up: WARMUP_STEPS-step runs of each (a full K-step warm-up would double the cost for nothing).
    """
    import lightning.pytorch as pl
    from torch.optim.lr_scheduler import LambdaLR

    from zoo.data.shakespeare import TinyShakespeare
    from zoo.model import build_model
    from zoo.optim import WarmupCosine
    from zoo.tasks.lm import LanguageModeling

    K = 50 if opts.quick else 300
    block, batch = 64, 12
    scheduler = {"warmup_steps": 100, "decay_steps": K, "min_lr": 1e-4}
    mirror = data_mirror()

    prepared = TinyShakespeare(block_size=block, batch_size=batch, mirror=mirror)
    prepared.setup()  # read and tokenise the text once

    def datamodule():
        """A fresh datamodule sharing the prepared data (setup() is then a no-op)."""
        return copy.copy(prepared)

    vocab = prepared.vocab_size
    model_cfg = dict(NANOGPT_MODEL, vocab_size=vocab)

    def plain(K: int = K):
        torch.manual_seed(0)
        dm = datamodule()
        model = build_model("decoder_only", ModelConfig(**model_cfg)).to(opts.device).train()
        o = NANOGPT_OPTIMIZER
        opt = adamw(model, o["lr"], o["betas"], o["weight_decay"])
        sched = LambdaLR(opt, WarmupCosine(scheduler["warmup_steps"], K, o["lr"], scheduler["min_lr"]))
        sync(opts.device)
        t0 = time.perf_counter()
        loader = dm.train_dataloader()
        it = iter(loader)
        for _ in range(K):
            try:
                x, y = next(it)
            except StopIteration:
                it = iter(loader)
                x, y = next(it)
            x, y = x.to(opts.device), y.to(opts.device)
            loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
        loss.item()
        sync(opts.device)
        return Timed(time.perf_counter() - t0)

    def lightning(K: int = K):
        torch.manual_seed(0)
        dm = datamodule()
        task = LanguageModeling("decoder_only", model_cfg, dm.tokenizer.state_dict(), dict(NANOGPT_OPTIMIZER),
                                scheduler, sample=None)
        with quiet_lightning():
            sync(opts.device)
            t0 = time.perf_counter()
            trainer = pl.Trainer(accelerator="gpu" if opts.device == "cuda" else "cpu", devices=1, max_steps=K,
                                 gradient_clip_val=1.0, logger=False, enable_checkpointing=False,
                                 enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=50,
                                 limit_val_batches=0, num_sanity_val_steps=0)
            trainer.fit(task, datamodule=dm)
            sync(opts.device)
            elapsed = time.perf_counter() - t0
        if trainer.global_step != K:
            raise RuntimeError(f"Lightning ran {trainer.global_step} steps, expected {K}")
        return Timed(elapsed)

    progress(f"overhead K={K}")
    for _ in range(opts.warmup):  # warm-up: a short run of each (kernels, allocator, Lightning's imports)
        plain(WARMUP_STEPS)
        lightning(WARMUP_STEPS)
    times = interleaved({"plain PyTorch loop": plain, "Lightning Trainer": lightning}, opts.reps, 0, opts.device)
    tokens = K * batch * block
    p, lt = median(times["plain PyTorch loop"]), median(times["Lightning Trainer"])
    rows = [[name, fmt(median(ts)), f"{fmt(min(ts))}–{fmt(max(ts))}", fmt(1e3 * median(ts) / K),
             fmt(tokens / median(ts))] for name, ts in times.items()]
    return "\n".join([
        "## overhead: plain PyTorch loop vs Lightning Trainer (nanoGPT CPU recipe)",
        "",
        f"{K} steps of 4 layers, 4 heads, d_model 128, block {block}, batch {batch}, vocab {vocab} "
        "(TinyShakespeare), AdamW + warmup-cosine + grad clip 1.0. Seconds per K-step run (median of "
        f"{opts.reps}, interleaved, after {opts.warmup} warm-up run(s) of {WARMUP_STEPS} steps each).",
        "",
        markdown_table(["loop", "s (median)", "s (min–max)", "ms/step", "tokens/s"], rows),
        "",
        f"Lightning overhead: {100 * (lt / p - 1):+.1f}% (Lightning / plain - 1; includes Trainer construction "
        "and fit set-up, amortised over the K steps)."])


# --------------------------------------------------------------------------------------------------
# 6. precision
# --------------------------------------------------------------------------------------------------

def bench_precision(opts: Options) -> str:
    """zoo DecoderOnly training step (as train_step) in fp32 vs with its forward under
    torch.autocast(bfloat16) (loss in fp32, weights and AdamW in fp32). tokens/s; bf16/fp32 > 1 = bf16 faster.
    Two copies of the same initial model, interleaved. Shapes as train_step (QUICK on CPU: nanogpt)."""
    rows = []
    for s in default_lm_shapes(opts):
        progress(f"precision {s.name}")
        idx = random_tokens((s.batch, s.block), s.vocab, opts.device, seed=1)
        targets = random_tokens((s.batch, s.block), s.vocab, opts.device, seed=2)
        steps = {}
        for p in ("fp32", "bf16"):
            torch.manual_seed(0)
            steps[f"zoo {p}"] = lm_train_step(DecoderOnly(zoo_lm_config(s)).to(opts.device).train(), idx, targets, p)
        times = interleaved(steps, opts.reps, opts.warmup, opts.device)
        tokens = s.batch * s.block
        tps = {k: tokens / median(v) for k, v in times.items()}
        rows.append([s.name, fmt(1e3 * median(times["zoo fp32"])), fmt(1e3 * median(times["zoo bf16"])),
                     fmt(tps["zoo fp32"]), fmt(tps["zoo bf16"]), ratio(tps["zoo bf16"], tps["zoo fp32"])])
        del steps
        gc.collect()
    return "\n".join([
        "## precision: zoo train_step, fp32 vs bf16 autocast",
        "",
        "Forward under torch.autocast(dtype=bfloat16), loss / weights / AdamW in fp32. bf16/fp32 = tokens/s "
        "ratio (> 1 = bf16 faster; on CPUs without AVX512-BF16 / AMX bf16 can be slower).",
        "",
        markdown_table(["shape", "fp32 ms", "bf16 ms", "fp32 tokens/s", "bf16 tokens/s", "bf16/fp32"], rows)])


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------

BENCHMARKS: Dict[str, Callable[[Options], str]] = {
    "train_step": bench_train_step,
    "seq2seq_step": bench_seq2seq_step,
    "generate": bench_generate,
    "memory": bench_memory,
    "overhead": bench_overhead,
    "precision": bench_precision,
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m zoo.bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small shapes, 5 repetitions (~1 minute on 2 CPU cores)")
    p.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="train_step: run the forward passes under bf16 autocast")
    p.add_argument("--shapes", default=None,
                   help=f"train_step / precision shapes, comma-separated among: {', '.join(LM_SHAPES)}")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (>= 5; default 5 quick, 7 full)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up rounds (default 1 quick, 2 full)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    p.add_argument("--out", default=None, help="also write the Markdown report to this file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    names = list(BENCHMARKS) if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose among: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: CUDA is not available", file=sys.stderr)
        return 2
    reps = args.reps if args.reps is not None else (5 if args.quick else 7)
    if reps < 5:
        print(f"--reps {reps}: at least 5 repetitions are needed for a meaningful median", file=sys.stderr)
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    opts = Options(quick=args.quick, device=args.device, precision=args.precision, reps=reps, warmup=max(0, warmup),
                   shapes=[s.strip() for s in args.shapes.split(",")] if args.shapes else None)
    if opts.shapes:
        try:
            default_lm_shapes(opts)
        except ValueError as e:
            print(str(e), file=sys.stderr)
            return 2

    t_start = time.perf_counter()
    torch.manual_seed(0)
    report = ["# zoo.bench", "", header(opts)]
    print("\n".join(report), flush=True)
    status = 0
    for name in names:
        t0 = time.perf_counter()
        try:
            section = BENCHMARKS[name](opts)
        except Exception as e:  # one broken benchmark must not hide the others' results
            status = 1
            traceback.print_exc()
            section = f"## {name}\n\n**failed**: {type(e).__name__}: {e}"
        section += f"\n\n({name}: {time.perf_counter() - t0:.1f} s)"
        report += ["", section]
        print("\n" + section, flush=True)
    tail = f"Total: {time.perf_counter() - t_start:.1f} s."
    report += ["", tail]
    print("\n" + tail, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(report) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())

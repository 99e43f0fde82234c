"""Benchmark 1: the decoder-only LM training step, zoo vs its peers."""

import gc

from zoo.bench.contenders import COMPILED_NOTE, label, notes_lines, training_steps
from zoo.bench.lm_contenders import lm_batch, lm_contenders
from zoo.bench.options import Options
from zoo.bench.report import PEAK_HEADERS, THROUGHPUT_HEADERS, markdown_table, progress, throughput_rows
from zoo.bench.shapes import default_lm_shapes
from zoo.bench.step_memory import STEP_MEMORY_NOTE, step_peaks
from zoo.bench.timing import interleaved


def bench_train_step(opts: Options) -> str:
    """Decoder-only LM training step: tokens/s = batch * block / step seconds (median).

    Contenders (zoo.bench.lm_contenders.lm_contenders; same d_model / heads / layers / vocab / batch / block,
    dropout 0): zoo DecoderOnly; torch TransformerEncoder (TorchGPT); HF GPT2LMHeadModel and
    x-transformers TransformerWrapper(Decoder) when installed, with the differences listed under the table.
    Step = forward and each contender's own standard loss (zoo: the chunked LM head + cross-entropy,
    zoo.model.loss.chunked_ce; HF: its labels= loss; the others: fp32 cross-entropy of the logits), backward, AdamW
    step, zero_grad(set_to_none=True) (zoo.bench.steps.train_step). --precision bf16 runs every contender's
    forward under bf16 autocast.
    Every model is built from torch.manual_seed(0); all live in memory at once (GPT-2 small: ~2 GB each
    with AdamW state). QUICK on CPU: nanogpt shape only (see default_lm_shapes).
    """
    sections, rows, contenders_seen = [], [], []
    for s in default_lm_shapes(opts):
        progress(f"train_step {s.name}")
        inputs, targets = lm_batch(s, opts.device)
        contenders = lm_contenders(s)
        steps, params, loss0, missing = training_steps(
            contenders, inputs, targets, opts.precision, opts.device, opts.compile
        )
        times = interleaved(steps, opts.reps, opts.warmup, opts.device)
        del steps
        gc.collect()
        peaks = step_peaks("lm", s.name, times, opts.device, opts.precision) if opts.step_memory else None
        rows += throughput_rows(
            s.name, times, s.batch * s.block, label("zoo DecoderOnly", opts.compile), params, loss0, missing, peaks
        )
        sections.append(s.describe())
        contenders_seen = contenders
    return "\n".join(
        [
            "## train_step: decoder-only LM training step (forward + backward + AdamW)",
            "",
            f"Shapes: {'; '.join(sections)}. Precision: {opts.precision}"
            f"{' (bf16 autocast on every contender forward)' if opts.precision == 'bf16' else ''}"
            f"{COMPILED_NOTE if opts.compile else ''}. "
            "tokens/s = batch x block / step time; zoo/peer = zoo tokens/s / peer tokens/s (> 1 = zoo faster). "
            "params = trainable parameters (tied counted once); loss₀ = the initialised model's loss on the batch "
            "(~ln(vocab) for every contender: same numerical regime).",
            "",
            markdown_table(THROUGHPUT_HEADERS + (PEAK_HEADERS if opts.step_memory else []), rows, label_columns=2),
            *([STEP_MEMORY_NOTE] if opts.step_memory else []),
            "",
            "zoo DecoderOnly: pre-LN, exact GELU, learned positions, tied head, no biases, SDPA is_causal (no mask "
            "tensor), GPT-2 init. Differences of the peers:",
            *notes_lines(contenders_seen),
        ]
    )

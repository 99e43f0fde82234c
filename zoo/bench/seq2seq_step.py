"""Benchmark 2: the encoder-decoder training step at the paper's base shape, zoo vs its peers."""

from zoo.bench.contenders import COMPILED_NOTE, label, notes_lines, training_steps
from zoo.bench.options import Options
from zoo.bench.report import PEAK_HEADERS, THROUGHPUT_HEADERS, markdown_table, progress, throughput_rows
from zoo.bench.seq2seq_contenders import seq2seq_batch, seq2seq_contenders
from zoo.bench.shapes import SEQ2SEQ_SHAPES, Seq2SeqShape
from zoo.bench.step_memory import STEP_MEMORY_NOTE, step_peaks
from zoo.bench.timing import interleaved


def bench_seq2seq_step(opts: Options, shape: Seq2SeqShape = None) -> str:
    """Encoder-decoder training step (teacher forcing): target tokens/s = batch * tgt_len / step seconds.

    Paper base shape (Vaswani et al. 2017): 6 + 6 layers, d_model 512, d_ff 2048, 8 heads, vocab 8000
    (source and target), batch 64 x (32 source + 32 target) tokens = 4096 tokens a step.
    QUICK: 2 + 2 layers, batch 8 (SEQ2SEQ_SHAPES['base-quick']). `shape` overrides both (tests).
    Contenders (zoo.bench.seq2seq_contenders.seq2seq_contenders): zoo EncoderDecoder, nn.Transformer with
    embeddings and a tied head (TorchSeq2Seq), HF MarianMTModel when installed. All post-LN, ReLU,
    sinusoidal positions, embeddings x sqrt(d_model), biases, dropout 0 (the paper uses 0.1; 0 keeps the
    timing free of RNG work, the same for all). Precision: always fp32.
    """
    s = shape or SEQ2SEQ_SHAPES["base-quick" if opts.quick else "base"]
    progress(f"seq2seq_step {s.name}")
    inputs, labels = seq2seq_batch(s, opts.device)
    contenders = seq2seq_contenders(s)
    steps, params, loss0, missing = training_steps(contenders, inputs, labels, "fp32", opts.device, opts.compile)
    times = interleaved(steps, opts.reps, opts.warmup, opts.device)
    del steps
    peaks = step_peaks("seq2seq", s.name, times, opts.device) if opts.step_memory else None
    shape_label = f"{s.n_layers}+{s.n_layers} L, b{s.batch}"
    zoo_name = label("zoo EncoderDecoder", opts.compile)
    rows = throughput_rows(shape_label, times, s.batch * s.tgt_len, zoo_name, params, loss0, missing, peaks)
    return "\n".join(
        [
            "## seq2seq_step: encoder-decoder training step (forward + backward + AdamW)",
            "",
            f"{s.describe()}; post-LN, ReLU, sinusoidal positions, dropout 0 (the paper trains with 0.1: off here "
            f"for timing fairness), fp32{COMPILED_NOTE if opts.compile else ''}. tokens/s counts target tokens; "
            "zoo/peer > 1 = zoo faster. params: "
            "trainable, tied counted once; loss₀: the initialised model's loss (~ln(vocab)).",
            "",
            markdown_table(THROUGHPUT_HEADERS + (PEAK_HEADERS if opts.step_memory else []), rows, label_columns=2),
            *([STEP_MEMORY_NOTE] if opts.step_memory else []),
            "",
            "zoo EncoderDecoder: separate source / target embeddings, head tied to the target one, a final "
            "LayerNorm after each stack, Xavier init. Differences of the peers:",
            *notes_lines(contenders),
        ]
    )

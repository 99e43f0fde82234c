"""Benchmarks of zoo's models against their PyTorch and third-party peers.

    python -m zoo.bench [--quick] [--only NAME,...] [--device cpu|cuda] [--precision fp32|bf16]
                        [--shapes NAME,...] [--reps N] [--warmup N] [--threads N] [--compile] [--out FILE.md]

Benchmarks (names for --only; default: all, in this order; one module each in zoo/bench/):

  train_step    decoder-only LM training step (forward + cross-entropy + backward + AdamW step +
                zero_grad(set_to_none=True)): zoo DecoderOnly vs a GPT built from nn.TransformerEncoder,
                Hugging Face GPT2LMHeadModel and x-transformers TransformerWrapper(Decoder). tokens/s.
  seq2seq_step  encoder-decoder training step at the paper's base shape: zoo EncoderDecoder vs
                nn.Transformer with embeddings and a tied head, and Hugging Face MarianMTModel.
                target tokens/s.
  generate      greedy decoding: zoo with its KV cache vs Hugging Face generate (cache on) vs zoo
                re-running the prefix; whole generations and the time per new token at 64 and 512
                tokens of context.
  memory        peak memory (MB) of one forward + backward as the sequence grows: zoo DecoderOnly
                (is_causal, no N x N mask) vs nn.TransformerEncoder with an explicit float causal mask
                vs zoo with explicit attention (return_attention=True, N x N scores stored), next to the
                analytic activation_memory formula (zoo.model.cost).
  overhead      the nanoGPT CPU recipe for K steps: a plain PyTorch loop vs the same under a minimal
                Lightning Trainer (zoo.tasks.lm.LanguageModeling). Wall seconds and overhead %.
  precision     zoo's train_step in fp32 vs under bf16 autocast (tokens/s), and the recipe's training /
                validation loss after K steps in each.
  loss          the output projection + cross-entropy alone (forward + backward) at GPT-2 small's head
                (N = 8 x 256, d 768, V 50,257): full logits + F.cross_entropy vs the fused, chunked
                zoo.model.loss.chunked_ce.linear_cross_entropy; time ratio and peak memory of each.
  peak          achieved FLOP/s of zoo's training step against this machine's own measured matmul
                FLOP/s, fp32 and bf16.
  throughput    experiment=scaling's training loop per size and architecture: the study's own Trainer
                (loggers, callbacks) vs a plain PyTorch loop over the same model, loss, optimizer and
                schedule; tokens/s and their ratio. Then torch.compile (both scopes) at each size: its
                compile cost, speed-up and the steps after which it pays. CPU only.

Third-party peers come with the optional extra: pip install -e ".[bench]" (pinned transformers and
x-transformers). Without it their rows say "not installed" and everything else runs.

Method (every timing comparison): all contenders live in ONE process, are warmed up first, then run
repetition by repetition in an order that alternates and rotates (A B C, C B A, B C A, ...; see
zoo.bench.timing.order) so that machine-load drifts hit them alike; the table reports the median of the
repetitions (>= 5). Seeds are fixed (torch.manual_seed). Ratio columns are zoo / peer throughput, > 1 =
zoo faster, followed by the number of repetitions zoo won against that peer (its time below the peer's
in the same repetition), e.g. '1.03 (9/11)'. `memory` is the exception: each length runs in its own
fresh `python -c` subprocess (peak memory is per process).

--compile runs train_step and seq2seq_step with every contender compiled alike: torch.compile(model),
zoo's model included (its whole forward; the shared loss stays eager).

--quick uses smaller shapes and fewer steps (GPT-2 small is skipped on CPU): see QUICK in each benchmark's
docstring. It leaves out throughput (experiment=scaling's grid, many minutes) unless --only names it.
CPU timings need a quiet machine: with other processes running, torch's worker threads wait for each other
and steps get many times slower (the header shows the load average at the start and warns when it is
high). Every run prints one header line (torch and peer versions, CPU / GPU name, threads) and one Markdown
section per benchmark; --out also writes them to a file. On a GPU: --device cuda (timings synchronise the
GPU; memory uses torch.cuda.max_memory_allocated).
"""

from zoo.bench.cli import BENCHMARKS, main, parse_args
from zoo.bench.options import Options
from zoo.bench.timing import Timed, interleaved, median

__all__ = ["BENCHMARKS", "Options", "Timed", "interleaved", "main", "median", "parse_args"]

"""`python -m zoo.translate CKPT_OR_RUN_DIR [SENTENCE ...]`: translate sentences with a checkpoint of a translation
run (task=translation, any architecture), like fairseq-interactive.

Sentences come from the command line, from `--input FILE` (one a line, gzip allowed) or from stdin (the default
when neither is given, or `--input -`); one hypothesis a line goes to stdout, in the input's order (a blank line
gives a blank line). The checkpoint decides the rest: its source tokenizer, its languages (data.src_lang /
tgt_lang), its decoder (zoo.tasks.translation.Translation.translate: greedy or beam search with the KV cache,
encoder_ar's re-reading decoder, mask-predict) and its test-time options (task.beam_size, task.length_penalty,
task.max_len_b, task.early_stopping, task.nat_iterations), which --beam, --lenpen, --max-len-b,
--early-stopping and --nat-iterations replace. A source is cut to the run's data.max_len tokens (EOS included)
as the run cut its own (a warning names the line), or refused with data.truncate=false or --no-truncate.
Bad input (a missing or foreign checkpoint, no sentences, a bad option) exits with status 2 and one message.

examples:
  python -m zoo.translate outputs/2026-12-01/12-00-00 "Ein Hund läuft durch den Schnee."
  python -m zoo.translate outputs/.../checkpoints/step900.ckpt --input test.de --beam 5 > test.hyp
  echo "Zwei Männer spielen Fußball." | python -m zoo.translate outputs/... --beam 1
"""

import argparse
import sys
from pathlib import Path

import torch

from zoo.data.batching import pack_by_tokens, pad
from zoo.data.files.lines import drop_bom, text_lines
from zoo.data.resolver import DataError
from zoo.model.checkpoint_file import read_checkpoint_file
from zoo.model.decoding.beam_search import check_early_stopping
from zoo.run.translate_checkpoint import TranslateError, check_checkpoint, checkpoint_path, load, source_limit


def read_sentences(args) -> tuple[list[str], str]:
    """The sentences to translate and where they came from (for messages): the command line's, --input's lines
    (zoo.data.files.lines.text_lines: gzip, encoding errors with their line), or stdin's lines, split at "\r\n", "\r"
    and "\n", a byte-order mark that starts them dropped, as the data readers read theirs. Raises
    TranslateError for a missing file or an input without any non-blank line."""
    if args.sentences and args.input is not None:
        raise TranslateError("give sentences on the command line or --input FILE, not both")
    if args.sentences:
        lines, where = list(args.sentences), "the command line"
    elif args.input not in (None, "-"):
        path = Path(args.input).expanduser()
        if not path.is_file():
            what = "is a folder" if path.is_dir() else "does not exist"
            raise TranslateError(f"--input {args.input} {what}; give a text file, one sentence a line")
        try:  # a UTF-8 text file (gzip when it ends in .gz), lines by the data readers' rule
            lines = text_lines(path, fix="give a UTF-8 text file, one sentence a line")
        except DataError as e:
            raise TranslateError(str(e)) from None
        where = str(path)
    else:
        if sys.stdin is None:
            raise TranslateError("no sentences: give them on the command line, with --input FILE, or on stdin")
        if sys.stdin.isatty():
            print("zoo.translate: reading sentences from stdin, one a line (Ctrl-D ends)", file=sys.stderr)
        text = drop_bom(sys.stdin.read()).replace("\r\n", "\n").replace("\r", "\n")  # as the data readers
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        where = "stdin"
    if not any(ln.strip() for ln in lines):
        raise TranslateError(
            f"no sentences to translate: {where} gave {'only blank lines' if lines else 'nothing'}; give one "
            f"sentence a line"
        )
    return lines, where


@torch.no_grad()
def translate(task, tokenizer, sentences: list[str], beam_size: int, max_tokens: int, limit: int) -> list[str]:
    """Hypotheses (detokenized target text) of `sentences`, in their order, decoded by task.translate with
    `beam_size` (1 = greedy) and the task's hparams (length_penalty, max_len_b, early_stopping,
    nat_iterations). Each source is tokenizer.encode(sentence)[:limit] + [EOS] (the rows of
    zoo.data.translation_set.TranslationSet). A batch holds sources of one length, at most max_tokens tokens
    counting each row twice (source + a target as long), with the padding and key_padding_mask of
    collate_translation: the decoders' length limits (source length + max_len_b) are then each sentence's own,
    so a sentence translates as it does alone, whatever else the input holds. A blank sentence gives ""
    without decoding."""
    cfg = task.model.cfg
    rows = {i: tokenizer.encode(s)[:limit] + [cfg.eos_id] for i, s in enumerate(sentences) if s.strip()}
    lens = {i: len(r) for i, r in rows.items()}
    batches = []
    for n in sorted(set(lens.values())):
        same = [i for i in rows if lens[i] == n]
        batches += pack_by_tokens(same, lens, lens, max(max_tokens, 2 * n))
    out = [""] * len(sentences)
    device = next(task.parameters()).device
    for batch in batches:
        src, mask = pad([rows[i] for i in batch], cfg.pad_id)
        hyps = task.translate({"src": src.to(device), "src_key_padding_mask": mask.to(device)}, beam_size)
        for i, ids in zip(batch, hyps):
            out[i] = task.tgt_tokenizer.decode(ids)
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m zoo.translate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("checkpoint", help="a translation run's directory, or a .ckpt of one")
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: --input, else stdin)")
    p.add_argument("--input", "-i", help="a text file, one sentence a line (gzip: .gz); - = stdin")
    p.add_argument("--beam", type=int, help="beam size, 1 = greedy (default: the run's task.beam_size)")
    p.add_argument("--lenpen", type=float, help="GNMT length penalty alpha (default: task.length_penalty)")
    p.add_argument("--max-len-b", type=int, help="at most source tokens + this many (default: task.max_len_b)")
    p.add_argument("--early-stopping", choices=["never", "true", "false"], help="beam stop rule (task.early_stopping)")
    p.add_argument("--nat-iterations", type=int, help="cmlm_mask_predict: mask-predict rounds (task.nat_iterations)")
    p.add_argument("--max-tokens", type=int, help="tokens per batch (default: the run's data.max_tokens, else 4096)")
    p.add_argument("--no-truncate", action="store_true", help="refuse a sentence longer than data.max_len")
    p.add_argument("--source-lang", help="refuse the checkpoint unless it translates from this language")
    p.add_argument("--target-lang", help="refuse the checkpoint unless it translates into this language")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    return p


def check_options(args) -> None:
    """Raise TranslateError for an option out of range (before the checkpoint is read)."""
    for key, low in (("beam", 1), ("max_len_b", 0), ("nat_iterations", 1), ("max_tokens", 2)):
        value = getattr(args, key)
        if value is not None and value < low:
            raise TranslateError(f"--{key.replace('_', '-')}={value} must be >= {low}")
    if args.lenpen is not None and not torch.isfinite(torch.tensor(args.lenpen)):
        raise TranslateError(f"--lenpen={args.lenpen} must be a finite number (GNMT alpha, e.g. 0.6)")
    if args.device not in ("cpu", "cuda") and not str(args.device).startswith("cuda:"):
        raise TranslateError(f"--device={args.device!r} must be cpu or cuda[:N]")
    if args.device != "cpu" and not torch.cuda.is_available():
        raise TranslateError(f"--device={args.device}: this torch sees no CUDA GPU; drop --device (cpu is the default)")


def apply_options(task, args) -> int:
    """Set the decoding options the command line gives on task.hparams (the ones Translation.translate reads);
    returns the beam size (--beam, else the run's task.beam_size). Raises TranslateError for a beam larger than
    the target vocabulary."""
    early = {"true": True, "false": False, "never": "never"}.get(args.early_stopping)
    for key, value in (
        ("length_penalty", args.lenpen),
        ("max_len_b", args.max_len_b),
        ("early_stopping", early),
        ("nat_iterations", args.nat_iterations),
    ):
        if value is not None:
            task.hparams[key] = value
    check_early_stopping(task.hparams.early_stopping)
    beam = args.beam if args.beam is not None else int(task.hparams.beam_size)
    vocab = task.model.cfg.vocab_size
    if beam > vocab:
        raise TranslateError(
            f"--beam={beam} is larger than the target vocabulary ({vocab} tokens): a beam holds at most one "
            f"hypothesis per token at its first step; use --beam between 1 and {vocab} (fairseq uses 5)"
        )
    return beam


def check_languages(args, data: dict, where: str) -> None:
    """--source-lang / --target-lang must be the checkpoint's languages (TranslateError otherwise)."""
    for flag, want, have in (
        ("--source-lang", args.source_lang, data.get("src_lang")),
        ("--target-lang", args.target_lang, data.get("tgt_lang")),
    ):
        if want is not None and want != have:
            raise TranslateError(
                f"{flag} {want}, but {where} translates {data.get('src_lang', '?')}->{data.get('tgt_lang', '?')}; "
                f"drop {flag} or pass a checkpoint of a {want} run"
            )


def long_sentences(tokenizer, lines: list[str], limit: int, where: str, refuse: bool) -> None:
    """Warn (stderr) about the sentences longer than `limit` tokens, which are cut to it, or with `refuse` raise
    TranslateError naming the first one's line; warn about sentences with tokens unknown to the tokenizer."""
    unk = getattr(tokenizer, "special_ids", {}).get("unk")
    long, unknown = [], []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        ids = tokenizer.encode(line)
        if len(ids) > limit:
            long.append((n, len(ids)))
        if unk is not None and unk in ids:
            unknown.append(n)
    if long and refuse:
        n, k = long[0]
        raise TranslateError(
            f"{where}, line {n}: {k} tokens, more than the {limit} the checkpoint reads (its data.max_len - 1, "
            f"EOS after them); {len(long)} sentence(s) are that long. Split them, or drop --no-truncate to cut them"
        )
    if long:
        n, k = long[0]
        print(
            f"zoo.translate: warning: {len(long)} sentence(s) longer than {limit} tokens are cut to {limit}, as the "
            f"run cut its own (data.max_len); the first: {where}, line {n} ({k} tokens)",
            file=sys.stderr,
        )
    if unknown:
        print(
            f"zoo.translate: warning: {len(unknown)} sentence(s) hold text the tokenizer does not know (read as "
            f"<unk>); the first: {where}, line {unknown[0]}",
            file=sys.stderr,
        )


def main(argv=None) -> int:
    args = parser().parse_intermixed_args(argv)  # a bad flag: argparse's usage message, exit 2
    try:
        check_options(args)
        path, why = checkpoint_path(args.checkpoint)
        fix = "pass a translation run's directory or one of its checkpoints/*.ckpt"
        ckpt = read_checkpoint_file(path, fix, TranslateError)
        data = check_checkpoint(ckpt, str(path))
        check_languages(args, data, str(path))
        lines, where = read_sentences(args)
        task, tokenizer = load(ckpt, str(path), args.device)
        beam = apply_options(task, args)
        dm = ckpt.get("datamodule_hyper_parameters") or {}
        limit = source_limit(task, dm)
        long_sentences(tokenizer, lines, limit, where, args.no_truncate or dm.get("truncate") is False)
    except (TranslateError, DataError, ValueError) as e:  # bad input: what and how to fix, no traceback
        print(f"zoo.translate: error: {e}", file=sys.stderr)
        return 2
    hp = task.hparams
    print(
        f"zoo.translate: {path} ({why}): +arch={hp.arch} {task.objective}, "
        f"{data.get('src_lang', '?')}->{data.get('tgt_lang', '?')}, "
        + ("greedy" if beam == 1 else f"beam {beam}, lenpen {hp.length_penalty}")
        + f", max_len_b {hp.max_len_b}"
        + (f", {hp.nat_iterations} mask-predict rounds" if "nat_iterations" in task.objective_impl.OPTIONS else ""),
        file=sys.stderr,
    )
    hyps = translate(task, tokenizer, lines, beam, args.max_tokens or dm.get("max_tokens") or 4096, limit)
    for h in hyps:
        print(h)
    return 0

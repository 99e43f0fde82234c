"""`python -m zoo.trace +arch=encoder_decoder`: one sentence through a Transformer, stage by stage: the command
line (zoo.trace.inputs reads the model and sentence, zoo.trace.hooks traces it, zoo.trace.text prints it,
zoo.trace.figure draws its attention). Bad input exits with 2 and one line naming the fix.
"""

import argparse
import json
import sys
from pathlib import Path

from zoo.errors import ConfigError
from zoo.trace.hooks import trace
from zoo.trace.inputs import TOY_SRC, TOY_TGT, TraceError, checkpoint_inputs, split_overrides, toy_inputs
from zoo.trace.stages import select, to_json
from zoo.trace.text import model_line, render_plain, render_rich, stage_list

USAGE = "python -m zoo.trace [+arch=ARCH] [model.KEY=VALUE ...] [ckpt_path=RUN] [--src ...] [--tgt ...] [options]"
EPILOG = """examples:
  python -m zoo.trace +arch=encoder_decoder
  python -m zoo.trace +arch=decoder_only model.mask=prefix --only decoder.0.self_attn.weights
  python -m zoo.trace +arch=encoder_decoder model.norm_first=true model.position=rope model.n_kv_heads=1
  python -m zoo.trace ckpt_path=outputs/2026-12-01/12-00-00 --src "ROMEO:" --plain
  python -m zoo.trace +arch=encoder_only --out trace/    # trace.json and trace.png
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m zoo.trace",
        usage=USAGE,
        description="Watch one sentence pass through a zoo Transformer, stage by stage: shapes, values, masks, "
        "attention weights per head, FLOPs and activation bytes, the top output tokens.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="+arch=..., model.KEY=VALUE, seed=N, or ckpt_path=RUN_DIR_OR_CKPT")
    p.add_argument(
        "--src",
        help=f'the source: space-separated toy tokens (default "{TOY_SRC}"), or text for a checkpoint\'s tokenizer',
    )
    p.add_argument("--tgt", help=f'the target, without <s> (default "{TOY_TGT}"; a checkpoint: none)')
    p.add_argument(
        "--only",
        help="print only these stages, comma-separated (names from --list; a prefix such as "
        "encoder.0.self_attn picks its group)",
    )
    p.add_argument("--list", action="store_true", help="list the stages and exit")
    p.add_argument("--out", type=Path, help="also write DIR/trace.json and DIR/trace.png (masks, attention)")
    p.add_argument("--svg", action="store_true", help="with --out: the figure as trace.svg")
    p.add_argument("--plain", action="store_true", help="plain text (the default when stdout is not a terminal)")
    p.add_argument(
        "--values",
        dest="values",
        action="store_true",
        default=None,
        help="print every tensor's values (default: those of up to 256 numbers)",
    )
    p.add_argument("--no-values", dest="values", action="store_false", help="print no tensor values")
    p.add_argument("--top-k", type=int, default=3, help="output tokens per position (default 3)")
    return p


def build(args) -> tuple:
    """(trace, arch, ModelConfig, inputs, model) of the parsed command line. Raises TraceError / ConfigError."""
    if args.top_k < 1:
        raise TraceError(f"--top-k {args.top_k} must be at least 1")
    ckpt, overrides = split_overrides(args.overrides)
    if ckpt is not None:
        if overrides:
            raise TraceError(
                f"{' '.join(overrides)}: a checkpoint fixes its model and arch; drop these overrides "
                f"with ckpt_path=, or drop ckpt_path= to trace the toy model"
            )
        arch, model, cfg, inputs, labels, vocab = checkpoint_inputs(args, ckpt)
    else:
        arch, model, cfg, inputs, labels, vocab = toy_inputs(args, overrides)
    try:
        tr = trace(model, inputs, labels, vocab, args.top_k)
    except ValueError as e:  # the model's own checks (a position beyond max_len, an id outside the vocabulary)
        raise TraceError(str(e)) from None
    return tr, arch, cfg, inputs, model


def check_out(out: Path) -> None:
    """Raise TraceError, before any tracing, when the folder --out cannot be made: it, or a folder above it,
    is an existing file."""
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                raise TraceError(
                    f"--out {out}: {p} is a file; --out DIR names a folder for trace.json and the figure "
                    f"(a new or an existing one)"
                )
            return


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_intermixed_args(argv)  # overrides and options in any order
    try:
        if args.out is not None:
            check_out(args.out)
        tr, arch, cfg, inputs, model = build(args)
        if args.list:
            print(stage_list(tr))
            return 0
        stages = select(tr, args.only.split(",") if args.only else None)
    except (TraceError, ConfigError, FileNotFoundError, ValueError) as e:
        print(f"zoo.trace: error: {e}", file=sys.stderr)
        return 2
    line = model_line(arch, cfg)
    if args.plain or not sys.stdout.isatty():
        print(render_plain(tr, stages, args.values, line))
    else:
        from rich.console import Console

        render_rich(tr, stages, args.values, line, Console())
    if args.out is not None:
        write_out(args.out, tr, stages, cfg, args.svg)
    return 0


def write_out(out: Path, tr, stages, cfg, svg: bool) -> None:
    """--out: DIR/trace.json and the figure (trace.png, or trace.svg), and a note on stderr naming the
    characters no font has."""
    from dataclasses import asdict

    from zoo.trace.figure import figure

    out.mkdir(parents=True, exist_ok=True)
    (out / "trace.json").write_text(json.dumps(to_json(tr, stages, asdict(cfg)), ensure_ascii=False), encoding="utf-8")
    fig, missing = figure(tr, out / ("trace.svg" if svg else "trace.png"))
    print(f"wrote {out / 'trace.json'} and {fig}")
    if missing:
        print(
            f"note: no font on this machine has {' '.join(sorted(missing))}: the figure writes "
            f"{' '.join(f'U+{ord(c):04X}' for c in sorted(missing))}; install a font that has them "
            f"(e.g. Debian's fonts-noto-cjk for Chinese, Japanese, Korean)",
            file=sys.stderr,
        )

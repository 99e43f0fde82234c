"""Write the command output in docs/walkthrough.md from fresh runs of `python -m zoo.trace`.

    python docs/gen_walkthrough.py            # rewrites the page's output blocks in place
    python docs/gen_walkthrough.py --check    # exit 1 if the committed page is out of date

Every output block of the page comes after a marker that names the command's arguments and the part of its
plain output (`--plain`) the block shows:

    <!-- zoo.trace +arch=encoder_decoder: src_embedding -->      a ```text block: that stage, as printed
    <!-- zoo.trace +arch=encoder_decoder: header -->             the model line and the inputs
    <!-- zoo.trace +arch=encoder_only: encoder.0.ffn total -->   several parts, a blank line between them
    <!-- zoo.trace +arch=encoder_decoder: modules -->            a table: every stage and the code that computes it

`total` is the cost summary at the end. Only the text after each marker is rewritten, up to the end of its code
block or table; the prose around it is left alone. tests/test_trace.py checks that the committed page equals a
fresh generation, so a change to what the trace prints (a module moved to another file, a new stage) comes with
the regenerated page. Runs in the checkout it lies in (its zoo on the path first).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "walkthrough.md"
# a marker and the block after it: a ```text fence, or a table (lines starting with |)
MARKER = re.compile(
    r"<!-- zoo\.trace (?P<args>[^:]*): (?P<parts>[^>]*?) -->\n"
    r"(?P<block>```text\n(?s:.*?)\n```|(?:\|.*\n)*\|.*)"
)


def run(args: str) -> str:
    """The plain output of `python -m zoo.trace <args> --plain`. Raises RuntimeError when it fails."""
    if str(ROOT) not in sys.path[:1]:
        sys.path.insert(0, str(ROOT))
    from zoo.trace.command import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*shlex.split(args), "--plain"])
    if code != 0:
        raise RuntimeError(f"python -m zoo.trace {args} exited with {code}")
    return out.getvalue()


def sections(output: str) -> dict[str, str]:
    """{"header", each stage name, "total": its text} of the plain output (blocks separated by a blank line)."""
    blocks = output.rstrip("\n").split("\n\n")
    stages = {re.match(r"== (\S+): ", block).group(1): block for block in blocks[1:-1]}
    return {"header": blocks[0], **stages, "total": blocks[-1]}


def modules_table(parts: dict[str, str]) -> str:
    """A Markdown table of every stage of a trace and the `module` line it prints (the code and its file)."""
    rows = ["| stage | computed by (file) |", "|---|---|"]
    for name, text in parts.items():
        module = re.search(r"^  module   (.*)$", text, re.M)
        if module:
            rows.append(f"| `{name}` | `{module.group(1)}` |")
    return "\n".join(rows)


def block(args: str, parts: str, outputs: dict[str, dict[str, str]]) -> str:
    """The text a marker asks for (outputs caches each command's sections). Raises KeyError naming an unknown
    part."""
    if args not in outputs:
        outputs[args] = sections(run(args))
    got = outputs[args]
    if parts.strip() == "modules":
        return modules_table(got)
    unknown = [p for p in parts.split() if p not in got]
    if unknown:
        raise KeyError(f"python -m zoo.trace {args} prints no {', '.join(unknown)}; its parts: {', '.join(got)}")
    return "```text\n" + "\n\n".join(got[p] for p in parts.split()) + "\n```"


def render(page: str) -> str:
    """The page with every marked block regenerated."""
    outputs: dict[str, dict[str, str]] = {}

    def fresh(m: re.Match) -> str:
        head = m.group(0)[: m.start("block") - m.start(0)]
        return head + block(m.group("args").strip(), m.group("parts"), outputs)

    return MARKER.sub(fresh, page)


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    new = render(page)
    if "--check" in argv:
        if new != page:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python docs/gen_walkthrough.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

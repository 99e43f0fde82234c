"""The trace's figure (`python -m zoo.trace --out DIR`): a row per attention (layer and kind), its mask and a heat
map per head, labelled by tokens drawn in their own script (zoo.trace.font)."""

import itertools
from pathlib import Path

from zoo.trace.stages import Stage, Trace


def figure(tr: Trace, path: Path) -> tuple[Path, set[str]]:
    """One figure (PNG, or SVG when path ends in .svg): a row per attention (layer and kind), its mask and a
    heat map per head, labelled by tokens (rows = queries, columns = keys), drawn with fonts that have their
    characters (zoo.trace.font). Returns (path, the characters no font has, written as U+XXXX)."""
    import matplotlib

    from zoo.trace.font import families

    rows = [s for s in tr.stages if s.weights is not None]
    if not rows:
        raise ValueError("this trace has no attention stage to draw")
    fonts, missing = families(t for s in rows for t in (*s.rows, *s.cols))
    with matplotlib.rc_context({"font.family": fonts}):
        _draw(rows, path, missing)
    return path, missing


def _draw(rows: list[Stage], path: Path, missing: set[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.trace.font import label

    h = max(s.weights.shape[0] for s in rows)
    fig, axes = plt.subplots(len(rows), h + 1, figsize=(2.6 * (h + 1), 2.6 * len(rows)), squeeze=False)
    for r, s in enumerate(rows):
        ylab = [label(t, missing) for t in s.rows]
        xlab = [label(t, missing) for t in s.cols]
        panels = [("mask (1 = may attend)", s.mask.float(), "Blues")] + [
            (f"head {i}", s.weights[i].float(), "viridis") for i in range(s.weights.shape[0])
        ]
        for c, ax in enumerate(axes[r]):
            if c >= len(panels):
                ax.axis("off")
                continue
            title, m, cmap = panels[c]
            ax.imshow(m.numpy(), cmap=cmap, vmin=0.0, vmax=1.0)
            if m.numel() <= 64:  # small maps: each cell's value written in it
                for (i, j), val in zip(itertools.product(*map(range, m.shape)), m.flatten().tolist()):
                    text = f"{val:.0f}" if c == 0 else f"{val:.2f}"
                    dark = val > 0.5 if c == 0 else val < 0.6  # Blues: dark at 1; viridis: dark at 0
                    ax.text(j, i, text, ha="center", va="center", fontsize=6, color="w" if dark else "k")
            ax.set_xticks(range(len(xlab)), xlab, rotation=90, fontsize=7)
            ax.set_yticks(range(len(ylab)), ylab, fontsize=7)
            ax.set_title(f"{s.name.rsplit('.', 1)[0]}\n{title}" if c == 0 else title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""The Scaling section's tuning stage (zoo.scaling.tune): lr_sweep.csv (every tuning run), a table of each family's
best rate per size (inside its grid or at an edge) and whether the study's cells ran within 0.5% of it, and the
figure lr_sweep.png: loss against the peak rate, one panel per family, one line per size."""

import csv
from collections import defaultdict
from pathlib import Path

from zoo.scaling.tune import SWEEP_FIELDS, TUNE_KIND, best_rate, seed_means, sweep_table, within, write_designs

TOLERANCE = 0.005  # a cell's rate must reach within this of its sweep's best seed-mean loss


def design_seeds(points: list[dict]) -> dict[tuple, set]:
    """{(arch, size): the tuning seeds its tuned cells chose their rate from (results.json's tune_seeds)}; a family
    and size whose cells recorded none has no entry."""
    out = defaultdict(set)
    for p in points:
        if p["kind"] != TUNE_KIND and p.get("tune_seeds"):
            out[(p["arch"], p["size"])].update(int(s) for s in p["tune_seeds"])
    return dict(out)


def this_design(points: list[dict]) -> list[dict]:
    """The tuning points (TUNE_KIND) of this study's design: where a family and size's cells record the seeds they
    were tuned on (scaling.tune_seed_start), the tuning runs of other seeds (an earlier design's, left in the
    folder) are left out."""
    seeds = design_seeds(points)
    return [
        p
        for p in points
        if p["kind"] == TUNE_KIND and int(p["seed"]) in seeds.get((p["arch"], p["size"]), {int(p["seed"])})
    ]


def tune_rows(points: list[dict]) -> list[dict]:
    """This design's tuning runs (this_design) that record their rate, as lr_sweep.csv's rows (SWEEP_FIELDS)."""
    rows = [
        {**p, "tokens": int(p["tokens"]), "lr": float(p["lr"]), "loss": float(p["loss"])}
        for p in this_design(points)
        if p.get("lr") not in (None, "")
    ]
    return sweep_table(rows)


def tune_designs(points: list[dict]) -> dict:
    """{(arch, size): the tuning design its runs recorded} (zoo.scaling.tune.tuning_design) of this design's tuning
    runs (this_design); a family and size whose runs recorded none, or two different ones, has no entry."""
    seen: dict = {}
    for p in this_design(points):
        seen.setdefault((p["arch"], p["size"]), []).append(p.get("design"))
    return {k: v[0] for k, v in seen.items() if v[0] is not None and all(d == v[0] for d in v)}


def write_lr_sweep(rows: list[dict], path: Path) -> Path:
    """lr_sweep.csv: header arch,size,seed,lr,tokens,loss; one row per tuning run."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(SWEEP_FIELDS)
        for r in rows:
            w.writerow([r["arch"], r["size"], r["seed"], f"{r['lr']:g}", r["tokens"], f"{r['loss']:.6f}"])
    return path


def cell_rates(fitted: list[dict]) -> dict[tuple, set]:
    """{(arch, size): the peak rates its fitted points ran}."""
    out = defaultdict(set)
    for p in fitted:
        if p.get("lr") not in (None, ""):
            out[(p["arch"], p["size"])].add(float(p["lr"]))
    return out


def tune_verdicts(rows: list[dict], fitted: list[dict]) -> list[dict]:
    """Per family and size swept: rates, seeds, the best rate, whether it is an edge of the grid, the rates its
    fitted cells ran and whether each reaches within TOLERANCE of the best seed-mean loss."""
    ran = cell_rates(fitted)
    out = []
    for arch, size in sorted({(r["arch"], r["size"]) for r in rows}):
        losses = seed_means(rows, arch, size)
        grid, best = sorted(losses), best_rate(losses)
        rates = sorted(ran.get((arch, size), ()))
        out.append(
            {
                "arch": arch,
                "size": size,
                "rates": grid,
                "seeds": min(len(v) for v in losses.values()),
                "best": best,
                "loss": sum(losses[best]) / len(losses[best]),
                "edge": best in (grid[0], grid[-1]),
                "ran": rates,
                "tuned": bool(rates) and all(within(losses, r, TOLERANCE) for r in rates),
            }
        )
    return out


def tune_table(verdicts: list[dict], csv_name: str, figure: str | None) -> list[str]:
    """The tuning section's lines: what was swept and how each family's cells relate to their sweep's best."""
    lines = [
        "### Tuning",
        "",
        "Each family's peak rate at each size, tuned on its own (zoo.scaling.tune): every rate of the size's "
        "lr_grid trained to the size's middle budget with the study's schedule, the best seed-mean loss chosen; a "
        "best rate at an edge of its grid is refused by the study. `cells ran`: the rates the fitted cells ran; "
        f"`tuned`: each within {TOLERANCE:.1%} of the best seed-mean loss. Every run: [{csv_name}]({csv_name})"
        + (f", figure [{figure}]({figure})." if figure else "."),
        "",
        "| arch | size | rates | seeds | best rate | its loss | inside the grid | cells ran | tuned |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        ran = ", ".join(f"{r:g}" for r in v["ran"]) or "none yet"
        lines.append(
            f"| {v['arch']} | {v['size']} | {', '.join(f'{r:g}' for r in v['rates'])} | {v['seeds']} | "
            f"{v['best']:g} | {v['loss']:.4f} | {'NO: an edge' if v['edge'] else 'yes'} | {ran} | "
            f"{'yes' if v['tuned'] else 'NO'} |"
        )
    return lines


def plot_lr_sweep(rows: list[dict], path: Path) -> Path:
    """lr_sweep.png: seed-mean loss against the peak rate (log x), one panel per family, one line per size; each
    seed's loss a dot."""
    from zoo.report.plots import _plt

    plt = _plt()
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    archs = sorted({r["arch"] for r in rows})
    low = min(float(r["lr"]) for r in rows)
    fig, axes = plt.subplots(1, len(archs), figsize=(4.2 * len(archs), 3.8), sharey=True, squeeze=False)
    for ax, arch in zip(axes[0], archs):
        for i, size in enumerate(sorted({r["size"] for r in rows if r["arch"] == arch})):
            losses = seed_means(rows, arch, size)
            grid = sorted(losses)
            ax.semilogx(grid, [sum(losses[r]) / len(losses[r]) for r in grid], "-o", ms=3, color=f"C{i}", label=size)
            for r in grid:
                ax.semilogx([r] * len(losses[r]), losses[r], ".", ms=2, color=f"C{i}", alpha=0.5)
        ax.set(title=arch, xlabel="peak learning rate")
        ax.xaxis.set_major_locator(FixedLocator([low * 2**k for k in range(12)]))  # each doubling of the lowest
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:.2g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("validation loss at the middle budget")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tune_section(points: list[dict], fitted: list[dict], out_dir: Path) -> tuple[list[str], list[Path]]:
    """The tuning lines, lr_sweep.csv (and lr_sweep.design.json: each family and size's tuning design, which
    scaling.tuning_table checks) and lr_sweep.png; nothing when no point is a tuning run."""
    rows = tune_rows(points)
    if not rows:
        return [], []
    path = write_lr_sweep(rows, Path(out_dir) / "lr_sweep.csv")
    write_designs(tune_designs(points), path)  # lr_sweep.design.json: what scaling.tuning_table checks
    figure = plot_lr_sweep(rows, Path(out_dir) / "lr_sweep.png")
    return tune_table(tune_verdicts(rows, fitted), path.name, figure.name) + [""], [figure]

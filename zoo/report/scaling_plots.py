"""The Scaling section's figures (zoo.report.scaling): loss against compute with each law's frontier, IsoFLOP
slices, N_opt against C, and loss against the target tokens trained."""

from pathlib import Path

import numpy as np

from zoo.scaling.frontier import Frontier
from zoo.scaling.points import flops_ratio


def scaling_plots(by_arch: dict, fits: dict, frontiers: dict, out_dir: Path) -> list[Path]:
    """scaling_frontier.png (loss against C, log-log: points, the law's frontier L*(C) with its 95% band, and the
    envelope fit dashed), scaling_isoflop.png (the fitted loss against N at three fixed C), scaling_nopt.png
    (N_opt against C with its band) and, where the points were recounted (they have target tokens),
    scaling_target_tokens.png (loss against the target tokens trained); one colour per architecture in all.
    frontiers: {key: {arch: Frontier}} (zoo.scaling.study.Study.frontiers)."""
    from zoo.report.plots import _plt

    plt = _plt()
    allc = [p["C"] for pts in by_arch.values() for p in pts]
    C = np.geomspace(min(allc) / 2, 10 * max(allc), 60)
    colors = {arch: f"C{i}" for i, arch in enumerate(by_arch)}
    out = [
        _save(_plot_frontier(plt, by_arch, fits, frontiers["C"], C, colors), out_dir / "scaling_frontier.png", plt),
        _save(_plot_isoflop(plt, by_arch, fits, allc, colors), out_dir / "scaling_isoflop.png", plt),
        _save(_plot_nopt(plt, by_arch, fits, C, colors), out_dir / "scaling_nopt.png", plt),
    ]
    if "target" in frontiers:
        fig = plot_target_tokens(plt, by_arch, frontiers["target"], colors)
        out.append(_save(fig, out_dir / "scaling_target_tokens.png", plt))
    return out


def _plot_frontier(plt, by_arch: dict, fits: dict, frontiers: dict, C: np.ndarray, colors: dict):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for arch, pts in by_arch.items():
        ax.loglog([p["C"] for p in pts], [p["loss"] for p in pts], "o", ms=3, alpha=0.6, color=colors[arch], label=arch)
        if arch in fits:
            r = flops_ratio(pts)
            al = fits[arch].allocation(C / r)
            ax.loglog(C, al["loss"]["value"], "-", color=colors[arch])
            if al["loss"]["ci"]:
                lo, hi = np.array(al["loss"]["ci"]).T
                ax.fill_between(C, lo, hi, color=colors[arch], alpha=0.15)
        fr = frontiers.get(arch)
        if fr is not None and fr.values is not None:
            ax.loglog(C, Frontier.loss(C, fr.values), "--", lw=1, color=colors[arch])
    ax.set(
        xlabel="training FLOPs C",
        ylabel="validation loss (nats/token)",
        title="Loss against compute: law frontier (band), envelope fit (dashed)",
    )
    ax.legend(fontsize=8)
    return fig


def _plot_isoflop(plt, by_arch: dict, fits: dict, allc: list, colors: dict):
    """The y axis spans the measured losses (a fit far off the data, at a bound, would squash every curve)."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for c, style in zip(np.geomspace(min(allc), max(allc), 3), ("-", "--", ":")):
        for arch, fit in fits.items():
            r = flops_ratio(by_arch[arch])
            Ns = np.geomspace(min(p["N"] for p in by_arch[arch]) / 4, max(p["N"] for p in by_arch[arch]) * 4, 50)
            with np.errstate(all="ignore"):
                y = fit.predict(Ns, c / (6 * r * Ns))
            ax.semilogx(Ns, y, style, color=colors[arch], label=f"{arch}, C = {c:.2g}")
    losses = [p["loss"] for pts in by_arch.values() for p in pts]
    ax.set_ylim(0.8 * min(losses), 1.5 * max(losses))
    ax.set(xlabel="non-embedding parameters N", ylabel="fitted loss", title="IsoFLOP curves (the fits at fixed C)")
    ax.legend(fontsize=6)
    return fig


def _plot_nopt(plt, by_arch: dict, fits: dict, C: np.ndarray, colors: dict):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for arch, fit in fits.items():
        al = fit.allocation(C / flops_ratio(by_arch[arch]))
        if all(v is not None for v in al["N_opt"]["value"]):
            ax.loglog(C, al["N_opt"]["value"], color=colors[arch], label=arch)
            if al["N_opt"]["ci"]:
                lo, hi = np.array(al["N_opt"]["ci"]).T
                ax.fill_between(C, lo, hi, color=colors[arch], alpha=0.15)
    ax.set(xlabel="training FLOPs C", ylabel="compute-optimal N_opt", title="N_opt against C (95% band)")
    ax.legend(fontsize=8)
    return fig


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_target_tokens(plt, by_arch: dict, frontiers: dict, colors: dict):
    """Loss against the target tokens trained (the positions the loss scores), log x: each size's cell means
    (over seeds) joined by a line, and each family's frontier on its envelope (dashed)."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for arch, pts in by_arch.items():
        for i, n in enumerate(sorted({p["N"] for p in pts})):
            cells = {}
            for p in pts:
                if p["N"] == n:
                    cells.setdefault(p["target"], []).append(p["loss"])
            T = sorted(cells)
            mean = [float(np.mean(cells[t])) for t in T]
            ax.semilogx(T, mean, "o-", ms=3, lw=1, color=colors[arch], label=None if i else arch)
        fr = frontiers.get(arch)
        if fr is not None and fr.values is not None:
            T = np.geomspace(min(p["target"] for p in pts), max(p["target"] for p in pts), 50)
            ax.semilogx(T, Frontier.loss(T, fr.values), "--", lw=1, color=colors[arch])
    ax.set(
        xlabel="target tokens trained (positions the loss scores)",
        ylabel="validation loss (nats/token)",
        title="Loss per target token: sizes (lines), frontiers (dashed)",
    )
    ax.tick_params(which="minor", labelbottom=False)  # a log axis: the decades labelled only
    ax.legend(fontsize=8)
    return fig

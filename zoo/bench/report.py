"""Markdown output of the benchmarks: tables, number formats, the header line, progress notes."""

import math
import os
import platform
import sys
from collections.abc import Sequence

import torch

from zoo.bench.options import Options
from zoo.bench.timing import median

NOT_INSTALLED = "not installed (pip install -e .[bench])"


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


def fmt(x: float | None, digits: int = 3) -> str:
    """A number with `digits` significant digits, no scientific notation for everyday magnitudes;
    '—' for None / NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:,.{decimals}f}"


def fmt_params(n: int) -> str:
    """A parameter count, exact, with thousands separators (e.g. 804,096)."""
    return f"{n:,}"


def ratio(zoo: float, peer: float) -> str:
    """zoo / peer, as a string with 2 decimals ('—' if peer is not positive)."""
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
    return "CPU: " + (platform.processor() or platform.machine())


def load_average() -> float | None:
    """The 1-minute load average (runnable processes), None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def peer_versions() -> str:
    """'transformers X, x-transformers Y' (or 'not installed') for the header."""
    from importlib import metadata

    parts = []
    for dist in ("transformers", "x-transformers"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} not installed")
    return ", ".join(parts)


def header(opts: Options) -> str:
    """One line: torch and peer versions, device name, thread count, mode, precision, the load before
    the start (with a warning paragraph when the CPU was busy)."""
    mode = "quick" if opts.quick else "full"
    load = load_average()
    line = (
        f"torch {torch.__version__} | {device_name(opts.device)} | threads {torch.get_num_threads()} "
        f"(of {os.cpu_count()} CPUs) | device {opts.device} | mode {mode} | reps {opts.reps} (median), "
        f"warmup {opts.warmup} | train_step precision {opts.precision}"
        f"{' | compiled (train_step, seq2seq_step)' if opts.compile else ''} | {peer_versions()}"
    )
    if load is not None:
        line += f" | load avg {load:.2f} at start"
        if opts.device == "cpu" and load >= 0.5 * (os.cpu_count() or 1):
            line += (
                "\n\n**Warning**: the machine was busy at the start; CPU timings (above all with several "
                "threads, which wait for each other) are unreliable. Rerun on a quiet machine."
            )
    return line


def progress(msg: str) -> None:
    """Progress notes go to stderr, so that stdout is the Markdown report only."""
    print(f"[zoo.bench] {msg}", file=sys.stderr, flush=True)


THROUGHPUT_HEADERS = ["shape", "contender", "params", "loss₀", "ms (median)", "ms (min–max)", "tokens/s", "zoo/peer"]
PEAK_HEADERS = ["step peak MB", "process peak MB", "step peak zoo/peer"]  # zoo.bench.step_memory


def wins(zoo: Sequence[float], peer: Sequence[float]) -> str:
    """'k/n': in k of the n repetitions zoo's time was below the peer's time of the same repetition
    (`interleaved` runs them back to back, so each pair shares the machine's state). With no real
    difference k follows Binomial(n, 1/2): 9/11 or better happens by chance with probability 0.033
    (one-sided sign test), 7/7 with 0.008."""
    return f"{sum(z < p for z, p in zip(zoo, peer))}/{min(len(zoo), len(peer))}"


def throughput_rows(
    label: str,
    times: dict[str, list[float]],
    tokens: int,
    zoo_name: str,
    params: dict[str, int],
    loss0: dict[str, float],
    missing: dict[str, str] | None = None,
    peaks: dict[str, dict] | None = None,
) -> list[list[str]]:
    """Rows of THROUGHPUT_HEADERS: label | contender | trainable parameters | initial loss | median ms |
    min–max ms | tokens/s | zoo/peer: zoo tokens/s over the contender's (> 1 = zoo faster), then in
    parentheses the repetitions zoo won (`wins`), e.g. '1.03 (9/11)'. With `peaks` (zoo.bench.step_memory
    .step_peaks) also PEAK_HEADERS: the step's peak growth and the process's peak, MB, and zoo's step peak
    over the contender's (< 1 = zoo needs less).
    `missing` (name -> why, e.g. NOT_INSTALLED) contenders get a row with the reason."""
    zoo_tps = tokens / median(times[zoo_name])
    rows = []
    for name, ts in times.items():
        m = median(ts)
        rows.append(
            [
                label,
                name,
                fmt_params(params[name]),
                f"{loss0[name]:.3f}",
                fmt(1e3 * m),
                f"{fmt(1e3 * min(ts))}–{fmt(1e3 * max(ts))}",
                fmt(tokens / m),
                "1.00 (ref)" if name == zoo_name else f"{ratio(zoo_tps, tokens / m)} ({wins(times[zoo_name], ts)})",
            ]
        )
        if peaks:
            p, z = peaks[name], peaks[zoo_name]["peak_bytes"]
            rows[-1] += [
                fmt(p["peak_bytes"] / 2**20),
                fmt(p["process_bytes"] / 2**20),
                "1.00 (ref)" if name == zoo_name else ratio(z, p["peak_bytes"]),
            ]
    width = len(THROUGHPUT_HEADERS) + (len(PEAK_HEADERS) if peaks else 0)
    rows += [[label, name, why] + ["—"] * (width - 3) for name, why in (missing or {}).items()]
    return rows

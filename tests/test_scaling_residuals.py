"""zoo.scaling.residuals: each cell's mean against the law, by hand."""

import math
from types import SimpleNamespace

import numpy as np

from zoo.scaling.residuals import cell_residuals, residual_table

LAW = SimpleNamespace(predict=lambda N, D: np.full(len(N), 2.0))  # a law that predicts 2.0 everywhere


def pts(size, N, D, losses):
    return [{"size": size, "N": N, "D": D, "loss": x, "run": f"{size}|{i}"} for i, x in enumerate(losses)]


def test_a_cells_residual_and_t_are_the_closed_form():
    """Losses 2.1, 2.3 at one cell: mean 2.2, residual +10%, se = std(ddof 1) / sqrt(2) = 0.1, t = 0.1 / (0.1 /
    2.2) = 2.2."""
    (r,) = cell_residuals(LAW, pts("s1", 10.0, 100.0, [2.1, 2.3]))
    assert math.isclose(r["resid"], 0.1) and math.isclose(r["t"], 2.2) and r["n"] == 2


def test_the_table_puts_a_sizes_budgets_in_order_on_one_row():
    points = pts("s1", 10.0, 200.0, [1.9, 1.9]) + pts("s1", 10.0, 100.0, [2.1, 2.3]) + pts("s2", 20.0, 100.0, [2.0])
    lines = residual_table({"x": points}, {"x": LAW})
    assert lines[-2] == "| x | s1 | +10.00% (+2.2) | -5.00% |"
    assert lines[-1] == "| x | s2 | +0.00% | – |"

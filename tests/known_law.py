"""A known law at the committed study's sizes and budgets (conf/experiment/scaling.yaml: s1-s3 four budgets in
tokens per non-embedding parameter, s4-s5 three), for tests that draw studies from it."""

from types import SimpleNamespace

from zoo.scaling.law import scaling_law

LAW = {"E": 1.6, "A": 900.0, "B": 2000.0, "alpha": 0.69, "beta": 0.475}
SIZES = {
    "s1": (1.0e4, (50, 100, 200, 400)),
    "s2": (2.5e4, (20, 40, 80, 160)),
    "s3": (5.7e4, (10, 20, 40, 70)),
    "s4": (1.56e5, (6.5, 13, 26)),
    "s5": (3.49e5, (5, 10, 20)),
}
TRUE = SimpleNamespace(predict=lambda N, D: scaling_law(N, D, *LAW.values()), values=LAW, converged=True)

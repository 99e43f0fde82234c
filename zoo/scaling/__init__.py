"""Scaling laws: fit L(N, D) = E + A / N^alpha + B / D^beta with bootstrap intervals (python -m zoo.scaling fit),
and judge a study's laws by their gates (python -m zoo.scaling gates points.csv; zoo.scaling.study).

The names below load their module (zoo.scaling.fit, .law, .huber) on first use, so that `python -m zoo.scaling` can
limit OpenBLAS to one thread before numpy loads (see zoo/scaling/__main__.py).
"""

_API = {  # name: the module that holds it
    "DELTA": "huber",
    "PARAMS": "law",
    "ScalingError": "law",
    "ScalingFit": "fit",
    "allocation_exponents": "law",
    "check_points": "law",
    "compute_optimal": "law",
    "fit_scaling_law": "fit",
    "scaling_law": "law",
}
__all__ = list(_API)


def __getattr__(name):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(f"zoo.scaling.{_API[name]}"), name)
    raise AttributeError(f"module 'zoo.scaling' has no attribute {name!r}")

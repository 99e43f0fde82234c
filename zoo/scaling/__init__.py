"""Scaling laws: fit L(N, D) = E + A / N^alpha + B / D^beta with bootstrap intervals (python -m zoo.scaling fit),
and judge a study's laws by their gates (python -m zoo.scaling gates points.csv; zoo.scaling.study).

The names below load zoo.scaling.fit on first use, so that `python -m zoo.scaling` can limit OpenBLAS to one thread
before numpy loads (see zoo/scaling/__main__.py).
"""

_API = (
    "DELTA",
    "PARAMS",
    "ScalingError",
    "ScalingFit",
    "allocation_exponents",
    "check_points",
    "compute_optimal",
    "fit_scaling_law",
    "scaling_law",
)
__all__ = list(_API)


def __getattr__(name):
    if name in _API:
        from zoo.scaling import fit

        return getattr(fit, name)
    raise AttributeError(f"module 'zoo.scaling' has no attribute {name!r}")

"""zoo.report: `python -m zoo.report` (build: the runs read back, the table, statistics, paired tests,
plots, attention maps, the literature's numbers) and `python -m zoo.dashboard` (dashboard: the W&B workspace)."""

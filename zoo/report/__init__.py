"""zoo.report: python -m zoo.report (runs read back, tables, statistics, paired tests, plots), the dashboard's code."""

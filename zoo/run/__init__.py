"""zoo.run: one run of `python -m zoo` (composed, checked, trained, results.json) and the commands that read runs."""

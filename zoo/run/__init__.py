"""zoo.run: the entry points. `python -m zoo` composes the config, checks it, builds data, model and trainer,
trains and writes results.json (train); `python -m zoo.generate` and `python -m zoo.translate` read a run's
checkpoint back."""

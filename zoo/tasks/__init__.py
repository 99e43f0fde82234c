"""zoo.tasks: one LightningModule per task (training code; the models stay in zoo.model).
Each task class lists the architectures it trains in ARCHS."""

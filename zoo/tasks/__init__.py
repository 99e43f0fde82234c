"""zoo.tasks: one LightningModule per task (lm, translation, classification); objectives/: how each trains an arch."""

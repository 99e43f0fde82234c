"""zoo.training.callbacks: Lightning callbacks of zoo's own."""

"""zoo.callbacks: Lightning callbacks of zoo's own."""

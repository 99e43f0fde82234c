"""zoo.interop: conversions between zoo's models and Hugging Face checkpoints, and model.init_from."""

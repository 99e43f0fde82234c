"""zoo.interop: conversions between zoo's models and other libraries' checkpoints (Hugging Face: zoo.interop.hf)."""

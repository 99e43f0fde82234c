"""zoo.model.loss: the fused, chunked output projection + cross-entropy (the full logits never built)."""

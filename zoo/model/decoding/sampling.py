"""Sampling text from a language model with its KV cache: the continuation a prompt gets (zoo.generate,
the validation samples of task=lm)."""

import torch


def sample(
    model,
    tokenizer,
    prompt: str,
    max_new_tokens: int,
    temperature: float = 0.8,
    top_k=None,
    top_p=None,
    seed=None,
    context_len: int | None = None,
) -> str:
    """prompt + max_new_tokens sampled characters (temperature 0 = greedy), with the KV cache.

    context_len: the longest context the model was trained on (tokens; data.block_size; default and at most
    model.max_len). Beyond it the context slides: each chunk re-reads the last context_len // 2 tokens and
    adds up to context_len - that many (nanoGPT crops its context to block_size the same way, one token
    at a time). Positions past the training length were never trained, so sampling never uses them.
    Raises ValueError for a prompt character outside the vocabulary or a negative max_new_tokens.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be >= 0")
    device = next(model.parameters()).device
    g = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    tokens = tokenizer.encode(prompt) or [0]
    window = min(context_len or model.cfg.max_len, model.cfg.max_len)
    keep = max(1, window // 2)
    remaining = max_new_tokens
    while remaining > 0:
        ctx = tokens[-keep:] if len(tokens) + remaining > window else tokens
        n = min(remaining, window - len(ctx))
        idx = torch.tensor([ctx], dtype=torch.long, device=device)
        out = model.generate(idx, n, temperature=temperature, top_k=top_k, top_p=top_p, generator=g)
        tokens = tokens + out[0, len(ctx) :].tolist()
        remaining -= n
    return tokenizer.decode(tokens)

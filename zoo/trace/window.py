"""What a checkpoint was trained on, as zoo.trace checks its --src / --tgt against it before tracing: a language
model's window (data.block_size, the task's context_len) and a translation run's sentence length (data.max_len,
BOS / EOS included). A longer input would put the model at positions it never saw in training."""


class WindowError(ValueError):
    """An input longer than what the checkpoint was trained on; zoo.trace prints it and exits with 2."""


def trained_lengths(hp: dict, dm: dict) -> dict:
    """{"window": tokens of a language model's training window} or {"sentence": tokens of a translation run's
    longest sentence, BOS / EOS included}, from a checkpoint's hyperparameters `hp` and its datamodule's `dm`;
    {} when it records neither (a classification run, an older checkpoint)."""
    tok = hp.get("tokenizer") or {}
    if "src" in tok:  # a translation run: two tokenizer sides
        max_len = dm.get("max_len")
        return {"sentence": max_len} if isinstance(max_len, int) and max_len >= 2 else {}
    window = hp.get("context_len") or dm.get("block_size")  # a classification run has neither
    return {"window": window} if isinstance(window, int) and window >= 1 else {}


def check_lengths(src: list[int], tgt: list[int] | None, trained: dict) -> None:
    """Raise WindowError when the source (a translation source with its EOS), the target (with its start token) or a
    language model's text (source + target) is longer than `trained` (trained_lengths) allows."""
    tgt = tgt or []
    window = trained.get("window")
    if window is not None and len(src) + len(tgt) > window:
        what = "--src + --tgt" if tgt else "--src"
        raise WindowError(
            f"{what} is {len(src) + len(tgt)} tokens, longer than the {window}-token window the checkpoint was "
            f"trained on (data.block_size={window}): shorten it to at most {window} tokens"
        )
    sentence = trained.get("sentence")
    if sentence is None:
        return
    for what, n, mark in (("--src", len(src) + 1, "EOS"), ("--tgt", len(tgt) + 1, "start token")):
        if n > sentence and (what == "--src" or tgt):
            raise WindowError(
                f"{what} is {n} tokens with its {mark}, longer than the sentences the checkpoint was trained on "
                f"(data.max_len={sentence}, {'EOS' if what == '--src' else 'BOS'} included): shorten it to at most "
                f"{sentence - 1} tokens"
            )

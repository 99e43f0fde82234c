"""The checkpoint zoo.translate reads: found (a .ckpt file, or a run directory's best or last), checked to be a
translation run's with its tokenizers, and loaded; the source length it reads; TranslateError, the command's
bad-input error."""

import inspect
from pathlib import Path

from zoo.data.bpe import tokenizer_from_state
from zoo.data.info import from_checkpoint
from zoo.model.checkpoint_file import run_checkpoint

TASK = "Translation"  # zoo_task of translation checkpoints (zoo.tasks.base.TaskBase.on_save_checkpoint)
OTHER_TASKS = {
    "Classification": "task=classification: it labels texts, it does not translate",
    "LanguageModeling": "task=lm: python -m zoo.generate samples text from it",
}


class TranslateError(ValueError):
    """Bad input to zoo.translate; main prints it and exits with 2."""


def checkpoint_path(path: str) -> tuple[Path, str]:
    """The checkpoint that `path` names and why (zoo.model.checkpoint_file.run_checkpoint: a .ckpt file, or a
    run directory's best, else last, checkpoint). Raises TranslateError naming what was looked for."""
    return run_checkpoint(path, TranslateError)


def check_checkpoint(ckpt: dict, where: str) -> dict:
    """The data settings (zoo.data.info.from_checkpoint) of a loaded checkpoint of a translation run. Raises
    TranslateError for a checkpoint of another task or of none (a converted Hugging Face checkpoint), naming
    what it is and what to use, or one without its tokenizers."""
    hp = ckpt.get("hyper_parameters") or {}
    data = from_checkpoint(ckpt)
    task, arch = ckpt.get("zoo_task"), hp.get("arch", "?")
    trained_on = f", trained on {data['dataset']}" if data["stored"] else ""
    if task != TASK:
        if task in OTHER_TASKS:
            why = OTHER_TASKS[task]
        elif "zoo_interop" in ckpt:
            why = (
                "a converted Hugging Face checkpoint (zoo.convert from-hf), without a translation run's tokenizers "
                "and decoding settings: fine-tune it with `python -m zoo +arch=... task=translation "
                "model.init_from=...` and translate with that run"
            )
        else:
            why = f"its task is {task or 'not recorded (no zoo_task)'}"
        raise TranslateError(
            f"{where} is not a translation checkpoint (+arch={arch}{trained_on}; {why}); zoo.translate needs a "
            f"checkpoint of a task=translation run"
        )
    tok = hp.get("tokenizer") or {}
    if not {"src", "tgt"} <= set(tok) or "model" not in hp or "state_dict" not in ckpt:
        raise TranslateError(
            f"{where} is a translation checkpoint without its tokenizers, model settings or weights "
            f"(hyper_parameters tokenizer.src / tokenizer.tgt / model, state_dict); it was not written by a zoo run"
        )
    return data


def load(ckpt: dict, where: str, device: str = "cpu"):
    """(the Translation task of a checked translation checkpoint (check_checkpoint), in eval mode on `device`,
    its source tokenizer). Raises TranslateError when its weights do not fit its own model settings."""
    from zoo.tasks.translation import Translation

    hp = ckpt["hyper_parameters"]
    params = inspect.signature(Translation.__init__).parameters
    task = Translation(**{k: v for k, v in hp.items() if k in params})
    state = {k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    try:
        task.model.load_state_dict(state)
    except RuntimeError as e:
        raise TranslateError(f"{where}: its weights do not fit its own model settings ({str(e)[:300]})") from None
    return task.to(device).eval(), tokenizer_from_state(hp["tokenizer"]["src"])


def source_limit(task, dm: dict) -> int:
    """The most source tokens a sentence may have before its EOS: the run's data.max_len - 1 (how the run cut
    its training and test sentences, zoo.data.parallel_text), within what the model holds: model.max_len - 1
    for encoder_decoder; for the archs that read source and target as one sequence, half of model.max_len
    less one (the run's check 2 x data.max_len <= model.max_len)."""
    cfg = task.model.cfg
    room = cfg.max_len // 2 - 1 if task.objective_impl.SOURCE == "joined" else cfg.max_len - 1
    max_len = dm.get("max_len")
    return min(room, max_len - 1) if isinstance(max_len, int) and max_len >= 2 else room

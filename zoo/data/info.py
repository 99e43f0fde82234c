"""The data settings a run trained on, as its checkpoints keep them (under CHECKPOINT_KEY, written by
zoo.tasks.base.TaskBase from the datamodule's data_info()) and zoo.report / zoo.generate read them."""

CHECKPOINT_KEY = "zoo_data"
LEGACY_LANGS = ("de", "en")  # Multi30k's default pair: assumed for a translation checkpoint that names none


def from_checkpoint(ckpt: dict) -> dict:
    """The data settings of a loaded checkpoint: its datamodule's data_info() plus "stored": True. A
    checkpoint written before zoo kept them gets {"dataset": "unknown", "stored": False, "note": where the
    rest comes from}: src_lang / tgt_lang from its datamodule hyperparameters, or LEGACY_LANGS for a
    translation checkpoint (zoo_task) without them, and tokenizer.joint from its joint_vocab."""
    if CHECKPOINT_KEY in ckpt:
        return {**ckpt[CHECKPOINT_KEY], "stored": True}
    dm = ckpt.get("datamodule_hyper_parameters") or {}
    info = {"dataset": "unknown", "stored": False, "note": "the checkpoint predates stored data settings"}
    if "src_lang" in dm:
        info.update(src_lang=dm["src_lang"], tgt_lang=dm.get("tgt_lang", LEGACY_LANGS[1]))
        info["note"] += "; languages from its datamodule hyperparameters"
    elif ckpt.get("zoo_task") == "Translation":
        info.update(src_lang=LEGACY_LANGS[0], tgt_lang=LEGACY_LANGS[1])
        info["note"] += f"; languages assumed: {'->'.join(LEGACY_LANGS)}, Multi30k's default"
    if "joint_vocab" in dm:
        info["tokenizer"] = {"kind": "bpe", "joint": dm["joint_vocab"]}
    return info

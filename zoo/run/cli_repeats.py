"""A config group chosen twice on the command line with +group= (+arch=a +arch=b): Hydra refuses it with advice
for a defaults list (`override arch: b`) that a command line cannot take; zoo says what to do instead."""

from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType


def repeated_groups(overrides: list[str], conf_dir: str) -> list[str]:
    """The messages of the config groups (folders of conf_dir) that `overrides` append more than once (+G=a
    +G=b): a run takes one option of a group; a multirun (-m +G=a,b) runs one job per option."""
    added: dict[str, list] = {}
    for o in OverridesParser.create().parse_overrides(overrides):
        if o.type == OverrideType.ADD and (Path(conf_dir) / o.key_or_group).is_dir():
            added.setdefault(o.key_or_group, []).append(o)
    found = []
    for group, given in added.items():
        if len(given) < 2:
            continue
        options = [v for o in given for v in (o.sweep_string_iterator() if o.is_sweep_override() else [o.value()])]
        what = "trains one architecture" if group == "arch" else f"takes one {group} option"
        found.append(
            f"+{group} is given twice ({' '.join(o.input_line for o in given)}), and a run {what}: keep one, or "
            f"{'compare' if group == 'arch' else 'sweep'} them in one multirun: "
            f"python -m zoo -m +{group}={','.join(dict.fromkeys(map(str, options)))}"
        )
    return found

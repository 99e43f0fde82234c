"""Every option of a zoo ModelConfig that a Hugging Face family cannot hold, found at once: a family's
config_to_hf adds each one it finds to a Blockers, then `refuse` raises one Unsupported that names them all, each
with the override that exports (Hydra syntax), so one retraining fixes every one of them. docs/interop.md ("Runs
that export") gives a ready override set per family."""

from dataclasses import dataclass, field


class Unsupported(ValueError):
    """A zoo option (or HF setting) the other side cannot express; the message names it."""


def hydra_value(value) -> str:
    """`value` as a Hydra command-line override writes it: true / false, null, a bare string, a number."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


@dataclass(frozen=True)
class Blocker:
    """One option the family cannot hold: option ("model.position='rope'"), why (what the family needs) and fix
    (the override that exports, e.g. "model.position=learned")."""

    option: str
    why: str
    fix: str


@dataclass
class Blockers:
    """The blocking options of `cfg` for Hugging Face `family` (its class `hf_class`), in the order found."""

    cfg: object
    family: str
    hf_class: str
    found: list[Blocker] = field(default_factory=list)

    def require(self, **allowed) -> None:
        """Add each option whose value is not among allowed[option] (a value or a tuple of them); its fix is
        the first allowed value."""
        for key, values in allowed.items():
            values = values if isinstance(values, (tuple, list)) else (values,)
            value = getattr(self.cfg, key)
            if value not in values:
                needs = " or ".join(repr(v) for v in values)
                self.add(f"model.{key}={value!r}", f"it needs {needs}", f"model.{key}={hydra_value(values[0])}")

    def add(self, option: str, why: str, fix: str) -> None:
        self.found.append(Blocker(option, why, fix))

    def refuse(self) -> None:
        """Raise Unsupported naming every blocker found, then the overrides that fix them all; nothing if none."""
        if not self.found:
            return
        n = len(self.found)
        each = "; ".join(f"{b.option} ({b.why})" for b in self.found)
        fixes = " ".join(dict.fromkeys(b.fix for b in self.found))
        raise Unsupported(
            f"{n} option{'s' if n > 1 else ''} of this zoo model {'have' if n > 1 else 'has'} no equivalent in "
            f"Hugging Face {self.family} ({self.hf_class}): {each}; train with {fixes} (docs/interop.md, "
            f'"Runs that export", gives a ready override set per family)'
        )

"""Fonts for the trace's figure (zoo.trace.figure): its token labels drawn in their own script.

matplotlib draws each character with the first font of its font family list that has it. The list here is
matplotlib's default family, then zoo's "Zoo Trace CJK" (zoo/trace/fonts: a subset of Noto Sans CJK SC
with the toy vocabulary's Chinese, SIL Open Font License 1.1), then, for characters neither has, the first
font of the machine that has them (not matplotlib's Last Resort font, whose glyphs are placeholder boxes). A
character no font has is written as its code point (U+6211).
"""

import functools
from collections.abc import Iterable
from pathlib import Path

FONT_FILE = Path(__file__).parent / "fonts" / "ZooTraceCJK-Regular.otf"


@functools.cache
def bundled_family() -> str:
    """The family name of zoo's font, registered with matplotlib's font manager on first use."""
    from matplotlib import font_manager

    font_manager.fontManager.addfont(str(FONT_FILE))
    return font_manager.FontProperties(fname=str(FONT_FILE)).get_name()


@functools.cache
def _charmap(path: str) -> frozenset[int]:
    """The code points the font file has a glyph for (its first face)."""
    from matplotlib import ft2font

    try:
        return frozenset(ft2font.FT2Font(path).get_charmap())
    except (OSError, RuntimeError):  # a font file FreeType cannot read
        return frozenset()


def _family_file(family: str) -> str | None:
    from matplotlib import font_manager

    try:
        return font_manager.findfont(font_manager.FontProperties(family=[family]), fallback_to_default=False)
    except ValueError:
        return None


def families(texts: Iterable[str]) -> tuple[list[str], set[str]]:
    """(the font family list that draws the characters of texts, the characters that no font has).
    Use the list as rcParams["font.family"] (matplotlib >= 3.6 takes each glyph from the first font that has it)."""
    import matplotlib
    from matplotlib import font_manager

    chain = [*matplotlib.rcParams["font.family"], bundled_family()]
    have = set().union(*(_charmap(p) for p in map(_family_file, chain) if p))
    missing = {c for t in texts for c in t if not c.isspace() and ord(c) not in have}
    for entry in font_manager.fontManager.ttflist:  # the machine's fonts, for the characters left
        if not missing:
            break
        if entry.name.startswith("Last Resort"):  # matplotlib's: a placeholder box for every code point
            continue
        found = {c for c in missing if ord(c) in _charmap(entry.fname)}
        path = _family_file(entry.name) if found else None
        found = {c for c in found if path and ord(c) in _charmap(path)}  # the file matplotlib finds for the family
        if found:
            chain.append(entry.name)
            missing -= found
    return chain, missing


def label(token: str, missing: set[str]) -> str:
    """The token, its characters that no font has written as code points: '我' -> 'U+6211'."""
    return "".join(f"U+{ord(c):04X}" if c in missing else c for c in token)

"""Class labels as read: the class of a label (a whole number or a name), their order, and a split carved out
stratified by label."""

import numbers
import re
from decimal import Decimal

import torch

from zoo.errors import DataError

NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")  # a decimal number, as text


def class_label(value, where: str) -> str:
    """The class of a label as read. A number (int, float, or text that reads as a decimal number: "1", "1.0",
    "1e1") that is whole is its integer's digits, so 1, 1.0, "1" and "1.0" are one class "1"; other text is
    itself, stripped; True / False stay "True" / "False".

    Raises DataError naming `where` (a file and line, or a key) for a number that is not whole (1.7, NaN, inf):
    a class is a whole number or a name."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = Decimal(float(value)) if float(value) == float(value) else Decimal("NaN")
    else:
        text = str(value).strip()
        if not NUMBER.fullmatch(text):
            return text
        number = Decimal(text)
    if number.is_finite() and number == number.to_integral_value():
        return str(int(number))
    raise DataError(
        f"{where}: label {value!r} is a number that is not whole; a class is a whole number or a name.\nFix: "
        f"write the label as a whole number (1, not 1.7) or as a name that does not read as a number (e.g. "
        f"'r1.7'), the same in train, val and test"
    )


def label_key(label: str):
    """Sort key of a label: integers by value, before any other label, which sorts as a string. Labels are
    class_label's, so every number among them is an integer's digits."""
    try:
        return (0, int(label), "")
    except ValueError:
        return (1, 0, label)


def stratified_split(labels: list[str], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(kept, carved) indices: `fraction` of each label's examples (rounded, at least one of a label with
    two or more) carved out in a seeded random order; both lists ascending."""
    g = torch.Generator().manual_seed(seed)
    carved = []
    for lab in sorted(set(labels), key=label_key):
        idx = [i for i, x in enumerate(labels) if x == lab]
        n = round(len(idx) * fraction)
        n = max(n, 1) if len(idx) > 1 else 0
        carved += [idx[j] for j in torch.randperm(len(idx), generator=g)[:n].tolist()]
    carved_set = set(carved)
    return [i for i in range(len(labels)) if i not in carved_set], sorted(carved)

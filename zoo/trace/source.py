"""Where a traced stage's code is defined: 'Class.attr (zoo/model/file.py)', named from the package's parent."""

import inspect
import sys
from pathlib import Path

from torch import nn


def where(obj: nn.Module | type | object, attr: str = "") -> str:
    """'Class.attr (zoo/model/file.py)' for a zoo module, class or function ('attend (zoo/model/blocks/attention.py)'),
    'nn.Class (torch.nn)' for one of torch's."""
    code = obj if inspect.isfunction(obj) or isinstance(obj, type) else type(obj)
    name = f"{code.__name__}.{attr}" if attr else code.__name__
    if code.__module__.startswith("torch."):
        return f"nn.{name} (torch.nn)"
    return f"{name} ({module_file(code)})"


def module_file(code: type | object) -> str:
    """The file that defines a class or function, relative to the folder its top-level package lies in
    ('zoo/model/x.py'), wherever that folder is (a clone named zoo, site-packages); the module's import path if
    it has no file."""
    top = sys.modules.get(code.__module__.split(".")[0])
    source = inspect.getsourcefile(code)
    if top is None or not getattr(top, "__file__", None) or source is None:
        return code.__module__
    root = Path(top.__file__).resolve().parent.parent
    try:
        return Path(source).resolve().relative_to(root).as_posix()
    except ValueError:  # defined outside its package's folder
        return code.__module__

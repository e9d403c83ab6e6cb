"""``"package.module:Attribute"``: a user's own class or factory, named by its import path.

The rule, shared by chunkers and embedders: a dotted module, a colon, a dotted attribute, no spaces.
A module that is not importable as installed is looked for in the current folder too, as
``python -m`` would find it. :mod:`chunkwise.chunkers.registry` and
:func:`chunkwise.embeddings.make_embedder` both load plugins through it; it imports nothing of
chunkwise.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["is_import_path", "load_import_path"]

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def is_import_path(text: object) -> bool:
    """Whether ``text`` reads as ``"package.module:Attribute"`` (a plugin's import path)."""
    return isinstance(text, str) and bool(_IMPORT_PATH.match(text))


def load_import_path(path: str, what: str) -> Any:
    """The object that ``path`` (``"package.module:Attribute"``) names.

    Parameters
    ----------
    path : str
        An import path (:func:`is_import_path`).
    what : str
        What the object is, for messages (``"embedder"``, ``"chunker"``).

    Raises
    ------
    ValueError
        If the module cannot be imported (the message names it and asks whether its package is
        installed) or has no such attribute.
    """
    import os
    import pkgutil
    import sys

    module_name, attr = path.split(":", 1)
    try:
        try:
            return pkgutil.resolve_name(path)
        except ModuleNotFoundError:
            # a module in the current folder, as `python -m` would find it
            if os.getcwd() in sys.path or "" in sys.path:
                raise
            sys.path.append(os.getcwd())
            return pkgutil.resolve_name(path)
    except AttributeError:
        raise ValueError(f"{what} {path!r}: module {module_name!r} has no attribute {attr!r}.") from None
    except ImportError as exc:
        raise ValueError(
            f"{what} {path!r}: cannot import module {module_name!r} ({type(exc).__name__}: {exc}); "
            "is its package installed in this environment (or on PYTHONPATH)?"
        ) from exc

"""Lazy public names for a package (PEP 562): each is imported from its submodule on first use.

Keeps ``import gsd`` and the ``gsd`` command line fast: numpy, scipy, pandas and torch load only
when a name that needs them is touched.
"""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]):
    """``(__getattr__, __dir__, __all__)`` for ``package`` given ``{submodule: names}``.

    Use in the package's ``__init__``::

        __getattr__, __dir__, __all__ = lazy_exports(__name__, {"groups": ("advantages",), ...})
    """
    where = {name: module for module, names in exports.items() for name in names}
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name):
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__():
        return sorted(set(namespace) | set(where))

    return __getattr__, __dir__, list(where)

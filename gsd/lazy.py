"""Lazy public names for a package (PEP 562): each is imported from its submodule on first use.

Keeps ``import gsd`` and the ``gsd`` command line fast: numpy, scipy, pandas and torch load only
when a name that needs them is touched.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable


def lazy_exports(
    package: str,
    exports: dict[str, tuple[str, ...]],
    *,
    submodules: tuple[str, ...] = (),
    aliases: dict[str, tuple[str, str]] | None = None,
):
    """``(__getattr__, __dir__, __all__)`` for ``package`` given ``{submodule: names}``: each name
    is imported from its submodule on first use (then kept in the package's namespace).

    ``submodules`` are names of the package's own submodules, imported on first use;
    ``aliases`` maps a name to (an absolute module, an attribute there) for a value the package
    shows under another name or from another package.  ``__all__`` lists every name, in order.

    Use in the package's ``__init__``::

        __getattr__, __dir__, __all__ = lazy_exports(__name__, {"groups": ("advantages",), ...})
    """
    where: dict[str, tuple[str, str | None]] = {
        name: (f"{package}.{module}", name) for module, names in exports.items() for name in names
    }
    where.update({name: (f"{package}.{name}", None) for name in submodules})
    where.update(aliases or {})
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = where[name]
        value = importlib.import_module(module)
        if attribute is not None:
            value = getattr(value, attribute)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__():
        return sorted(set(namespace) | set(where))

    return __getattr__, __dir__, list(where)


def built_on_first_use(module: str, builders: dict[str, Callable[[], object]]):
    """``__getattr__`` for a module whose public names are built when first used: a class that
    subclasses an optional library's (TRL's), so that importing the module does not import the
    library.  Each is built once by its builder and kept in the module's namespace; a builder
    that raises (the library missing) leaves nothing behind, and the next use tries again."""
    namespace = importlib.import_module(module).__dict__

    def __getattr__(name):
        if name not in builders:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = namespace[name] = builders[name]()
        return value

    return __getattr__


def moved_names(module: str, moved: dict[str, tuple[str, str]]):
    """``__getattr__`` for a module whose public names moved elsewhere: ``moved`` maps each old
    name to (its new module, its name there).  Each look-up imports the new place and warns, with
    a DeprecationWarning naming it, at the line that used the old path (``stacklevel=2``: a
    ``from old import name`` statement, or ``old.name``)."""

    def __getattr__(name):
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import warnings

        new_module, new = moved[name]
        warnings.warn(
            f"{module}.{name} has moved: import it as {new_module}.{new} "
            f"(the old path will be removed in a later release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_module), new)

    return __getattr__


class _MovedModule(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a module by its old dotted name and hands out the module at its new one.

    The loader replaces itself in ``sys.modules`` with the new module (the import system returns
    what ``sys.modules`` holds once the module has executed), so old and new names are one object:
    a monkeypatch through either is seen through both."""

    def __init__(self, moved: dict[str, str]):
        self.moved = moved

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.moved:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None  # a placeholder; exec_module swaps in the real module

    def exec_module(self, module):
        import warnings

        old = module.__name__
        new = self.moved[old]
        warnings.warn(
            f"the module {old} has moved to {new}: import it from there "
            f"(the old path will be removed in a later release)",
            DeprecationWarning,
            stacklevel=2,  # warnings skips the import system's frames: this is the import line
        )
        sys.modules[old] = importlib.import_module(new)


def install_moved_modules(moved: dict[str, str]) -> None:
    """Let ``import old`` give the module ``moved[old]``, with a DeprecationWarning (once per
    process: the module is then in ``sys.modules`` under both names)."""
    if not any(isinstance(finder, _MovedModule) and finder.moved == moved for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModule(moved))

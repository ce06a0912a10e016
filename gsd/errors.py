"""The package's error classes (bad input, a missing optional dependency), in a module that imports
nothing (the CLI needs it at start-up)."""

__all__ = ["InputError", "MissingExtra"]


class InputError(ValueError):
    """Bad input to a gsd function or command: the message names the argument and the value.

    A subclass of ``ValueError``, so ``except ValueError`` still catches it.  The ``gsd``
    command line reports exactly this class as one line on stderr with exit status 2; any other
    exception is a bug and keeps its traceback.
    """


InputError.__module__ = "gsd"  # shown as gsd.InputError, where users import it from


class MissingExtra(ModuleNotFoundError):
    """A feature whose optional dependency is not installed: the message names the feature and
    the extra that installs it (``pip install '.[torch]'`` in the checkout).

    A ``ModuleNotFoundError`` (``name`` is the missing module), so code that treats an absent
    module as "that part is not there" still does; the ``gsd`` command line reports it as one line
    on stderr with exit status 2, like bad input.
    """


MissingExtra.__module__ = "gsd"

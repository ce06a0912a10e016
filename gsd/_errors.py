"""The package's input-error class, in a module that imports nothing (the CLI needs it at start-up)."""

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad input to a gsd function or command: the message names the argument and the value.

    A subclass of ``ValueError``, so ``except ValueError`` still catches it.  The ``gsd``
    command line reports exactly this class as one line on stderr with exit status 2; any other
    exception is a bug and keeps its traceback.
    """


InputError.__module__ = "gsd"  # shown as gsd.InputError, where users import it from

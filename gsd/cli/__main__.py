"""``python -m gsd.cli``: the ``gsd`` command."""

import sys

from gsd.cli import run

sys.exit(run())

"""Shared fixtures of the core tests."""

import pytest

from gsd.cli import main


@pytest.fixture
def gsd_cli(capsys):
    """Run ``gsd ARGV...`` in-process: ``(exit status, stdout, stderr)``."""

    def run(*argv):
        rc = main(list(argv))
        out, err = capsys.readouterr()
        return rc, out, err

    return run

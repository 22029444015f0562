"""The ``odradek`` command, one module per subcommand; :func:`main` (in :mod:`odradek.cli.main`) is the console script."""

from odradek.cli.main import main

__all__ = ["main"]

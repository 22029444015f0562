"""The ``odradek`` command, one module per subcommand; `main` is the console script."""

from odradek.cli.main import main

__all__ = ["main"]

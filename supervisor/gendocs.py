"""``python -m supervisor.gendocs [--check]``: the command's kept name (the docs and the generated
files name it); the tool is :mod:`supervisor.cli.gendocs`."""

from __future__ import annotations

import sys

from .cli.gendocs import main

if __name__ == "__main__":
    sys.exit(main())

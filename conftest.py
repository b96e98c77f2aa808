"""Loaded for every test folder (tests/ and examples/): the suite's progress lines,
tests/progress.py."""

pytest_plugins = ["tests.progress"]

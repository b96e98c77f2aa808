"""The plain ``run`` command line that ``python -m supervisor`` reads without the ops CLI
(for a fast start); anything else goes to the CLI."""

from __future__ import annotations

import pytest

from supervisor.__main__ import run_options


@pytest.mark.parametrize(
    "argv, opts",
    [
        ([], {}),
        (["run"], {}),
        (["--config", "a.toml"], {"--config": "a.toml"}),
        (["--config", "a.toml", "run", "--workers", "8"], {"--config": "a.toml", "--workers": 8}),
        (
            ["run", "--config=a.toml", "--queues", "x,y", "--ready-fd", "5", "--json"],
            {"--config": "a.toml", "--queues": "x,y", "--ready-fd": 5},
        ),
        (["run", "--workers", "-1"], {"--workers": -1}),  # run() refuses it with the CLI's message
    ],
)
def test_a_plain_run_line_is_read_here(argv, opts):
    assert run_options(argv) == opts


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["--config", "a.toml", "status"],
        ["-h"],
        ["run", "--help"],
        ["run", "run"],
        ["run", "--workers", "eight"],
        ["run", "--workers"],
        ["run", "--config", "a", "--config", "b"],
        ["run", "--verbose"],
        ["run", "extra"],
        ["web", "--port", "8080"],
    ],
)
def test_anything_else_goes_to_the_cli(argv):
    assert run_options(argv) is None

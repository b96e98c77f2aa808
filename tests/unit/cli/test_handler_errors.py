"""A handler module that fails to import, as a new user meets it through the real
``jobq`` CLI: ``jobq run`` says it in one line naming the module, the ``handlers`` key and the
config file, then prints the traceback as lines; ``config set handlers`` refuses the module and
``config check`` reports it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.model.exitcodes import ExitCode
from tests.proc import write_config
from tests.unit.cli.test_cli import jobq, ok

TYPO = "myapp.jbo"


def one_line(cfg: Path) -> str:
    return (
        f"handler module '{TYPO}' (handlers in {cfg.resolve()}) failed to import: "
        f"ModuleNotFoundError: No module named 'myapp'"
    )


def test_run_says_which_module_key_and_file_in_one_line_then_the_traceback(tmp_path):
    cfg = write_config(tmp_path, handlers=[TYPO])
    r = jobq(cfg, "run")
    assert r.returncode == ExitCode.BOOT_FAILED, r.stderr
    lines = r.stderr.splitlines()
    (i,) = [n for n, line in enumerate(lines) if "supervisor.boot_failed" in line]
    assert lines[i].endswith(f'error="{one_line(cfg)}"'), lines[i]
    assert "\\n" not in lines[i] and len(lines[i]) < 300
    assert lines[i + 1] == "Traceback (most recent call last):"
    assert lines[-1] == "ModuleNotFoundError: No module named 'myapp'"


def test_run_in_json_format_keeps_the_traceback_in_its_own_field(tmp_path):
    cfg = write_config(tmp_path, handlers=[TYPO], log_format="json")
    r = jobq(cfg, "run")
    assert r.returncode == ExitCode.BOOT_FAILED, r.stderr
    (rec,) = [
        json.loads(line) for line in r.stderr.splitlines() if "supervisor.boot_failed" in line
    ]
    assert rec["error"] == one_line(cfg)
    assert rec["traceback"].startswith("Traceback (most recent call last):")


def test_config_set_handlers_refuses_a_module_that_does_not_import(tmp_path):
    cfg = write_config(tmp_path, handlers=["opsjobs"])
    before = cfg.read_text()
    r = jobq(cfg, "config", "set", "handlers", f'["{TYPO}"]')
    assert r.returncode == ExitCode.CONFIG_INVALID, r.stderr
    assert one_line(cfg) in r.stderr and "is unchanged" in r.stderr
    assert cfg.read_text() == before
    ok(jobq(cfg, "config", "set", "handlers", '["opsjobs", "testjobs"]'))
    assert '"testjobs"' in cfg.read_text()


@pytest.mark.parametrize(
    "handlers,code", [(["opsjobs"], ExitCode.OK), ([TYPO], ExitCode.BOOT_FAILED)]
)
def test_config_check_imports_the_handler_modules(tmp_path, handlers, code):
    cfg = write_config(tmp_path, handlers=handlers)
    r = jobq(cfg, "config", "check")
    assert r.returncode == code, r.stderr
    if code == ExitCode.OK:
        assert "ops:ok" in r.stdout and str(cfg.resolve()) in r.stdout
    else:
        first, second = r.stderr.splitlines()[:2]
        assert first == f"jobq: {one_line(cfg)}" and second == "Traceback (most recent call last):"


def test_config_check_reports_an_invalid_file_with_exit_3(tmp_path):
    cfg = write_config(tmp_path, supervisor={"workers": -1})
    r = jobq(cfg, "config", "check")
    assert r.returncode == ExitCode.CONFIG_INVALID and "supervisor.workers" in r.stderr

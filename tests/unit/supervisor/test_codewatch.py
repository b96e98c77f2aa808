"""supervisor.codewatch: which imported modules are the application's, and which changed."""

from __future__ import annotations

import importlib
import json
import os
import sys

import shared.settings.config
from supervisor import codewatch


def test_the_applications_modules_are_those_outside_python_and_jobq(tmp_path, monkeypatch):
    (tmp_path / "cw_app.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    app = importlib.import_module("cw_app")
    try:
        found = codewatch.app_files([app, json, os, shared.settings.config, codewatch])
        assert found == {"cw_app": os.path.realpath(tmp_path / "cw_app.py")}
    finally:
        sys.modules.pop("cw_app", None)


def test_a_changed_or_removed_file_is_named_and_reimport_runs_the_new_code(tmp_path, monkeypatch):
    for name in ("cw_a", "cw_b"):
        (tmp_path / f"{name}.py").write_text("V = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    a, _ = importlib.import_module("cw_a"), importlib.import_module("cw_b")
    try:
        watch = codewatch.CodeWatch()
        watch.seen()
        assert watch.changed() == []
        (tmp_path / "cw_a.py").write_text("V = 22\n")  # a size of its own: seen whatever the clock
        (tmp_path / "cw_b.py").unlink()
        assert watch.changed() == ["cw_a", "cw_b"]
        codewatch.reimport(["cw_a"], [])
        assert a.V == 22
        watch.seen()
        assert watch.changed() == []
    finally:
        for name in ("cw_a", "cw_b"):
            sys.modules.pop(name, None)

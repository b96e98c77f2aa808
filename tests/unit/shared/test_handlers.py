"""shared.execution.handlers: declaring handlers and hooks, the registry, and loading handler
modules (each failure naming the job type, module or config file)."""

from __future__ import annotations

import sys

import pytest

from shared.execution import handlers as h


def fn(payload, job):
    return None


async def afn(payload, job):
    return None


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"max_attempts": 0}, "'t': max_attempts must be an integer >= 1, got 0"),
        ({"max_attempts": 1.5}, "max_attempts must be an integer >= 1, got 1.5"),
        ({"timeout": 0}, "'t': timeout must be a number > 0, got 0"),
        ({"timeout": "5"}, "timeout must be a number > 0, got '5'"),
        ({"async_concurrency": 0}, "async_concurrency must be an integer from 1 to 10000, got 0"),
        ({"async_concurrency": True}, "got True"),
        ({"queue": "a,b"}, "comma"),
    ],
)
def test_bad_declarations_are_refused_naming_the_type(kwargs, words):
    with pytest.raises(ValueError, match=words):
        h.handler("t", **kwargs)


@pytest.mark.parametrize("jtype", ["", None, 5])
def test_a_handler_needs_a_type_name(jtype):
    with pytest.raises(ValueError, match="handler type must be a non-empty string"):
        h.handler(jtype)


def test_async_concurrency_needs_an_async_handler():
    with pytest.raises(ValueError, match=r"needs an async def handler, and .*test_handlers\.fn"):
        h.handler("t", async_concurrency=2)(fn)
    spec = getattr(h.handler("t", async_concurrency=2, timeout=3)(afn), h.ATTR)
    assert spec.is_async and spec.timeout == 3.0 and isinstance(spec.timeout, float)


def test_retry_after_bounds():
    assert h.RetryAfter(0).seconds == 0.0 and "after 2.5 s" in str(h.RetryAfter(2.5))
    for bad in (-1, float("nan"), float("inf"), h.RetryAfter.MAX_DELAY + 1):
        with pytest.raises(ValueError, match="RetryAfter seconds must be a finite number"):
            h.RetryAfter(bad)
    assert h.PermanentError.__module__ == "shared.handlers"  # the name error texts show


def test_registry_refuses_two_handlers_for_a_type_but_not_the_same_twice():
    reg = h.Registry([h.HandlerSpec("t", fn)])
    reg.add(h.HandlerSpec("t", fn))
    assert len(reg) == 1
    with pytest.raises(ValueError, match=r"'t' has two handlers: .*\.fn and .*\.afn"):
        reg.add(h.HandlerSpec("t", afn))


def test_add_module_collects_handlers_and_hooks_once(tmp_path, monkeypatch):
    (tmp_path / "jobs_mod_a.py").write_text(
        "from shared.execution.handlers import handler, on_failed\n"
        "@handler('send')\ndef send(p, j): pass\n"
        "@on_failed\ndef alert(job, error): pass\n"
        "also = alert\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = h.load_registry(["jobs_mod_a"])
    assert "send" in reg.types() and reg.modules == ("jobs_mod_a",)
    assert [f.__name__ for f in reg.hooks["failed"]] == ["alert"] and reg.hooks["completed"] == []
    assert any(t.startswith("cleanup:") for t in reg.types())  # the built-in jobs


def test_a_module_that_fails_to_import_is_named_with_its_config(tmp_path, monkeypatch):
    (tmp_path / "jobs_mod_b.py").write_text("raise SystemExit('bad\\nthing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(h.HandlerImportError) as err:
        h.load_registry(["jobs_mod_b"], source=str(tmp_path / "jobq.toml"))
    e = err.value
    assert e.module == "jobs_mod_b"
    assert e.summary == (
        f"handler module 'jobs_mod_b' (handlers in {tmp_path / 'jobq.toml'}) "
        "failed to import: SystemExit: bad thing"
    )
    assert "Traceback" in e.traceback and str(e).startswith(e.summary)
    sys.modules.pop("jobs_mod_b", None)


def test_import_path_puts_the_config_folder_after_the_current_one(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", ["/elsewhere"])
    h.import_path(str(tmp_path / "jobq.toml"))
    assert sys.path[:2] == ["", str(tmp_path)]
    h.import_path(str(tmp_path / "jobq.toml"))
    assert sys.path.count(str(tmp_path)) == 1

"""The dashboard against hostile requests, over real HTTP to a
real ``jobq web`` process: DNS rebinding (a Host or Origin of another site), non-ASCII tokens and
CSRF values, NUL characters in filters, on both engines. Every refusal is a fixed page with the
Content-Security-Policy and no database location in it; nothing is ever a 500."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shared.producer.api import JobQueue
from shared.settings.config import load
from tests.proc import env, write_config
from tests.unit.web.test_web import Web

httpx = pytest.importorskip("httpx")
ATTACKER = "rebind.attacker.example"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A SQLite database with one job holding a secret payload, and a dashboard on it (no token)."""
    folder = tmp_path_factory.mktemp("websec")
    config = write_config(folder, handlers=[])
    with JobQueue(config=load(config)) as q:
        job = q.enqueue("sec:job", {"secret": "payload-only-the-owner-sees"})
    web = Web(config).wait_up()
    try:
        yield {"config": config, "web": web, "job": job, "db": str(folder)}
    finally:
        web.close()


def _fixed_refusal(r: httpx.Response, status: int, db: str) -> None:
    """``r`` is the refusal ``status``: the CSP on it, and nothing of the database in its body."""
    assert r.status_code == status, r.text
    assert "frame-ancestors 'none'" in r.headers.get("content-security-policy", ""), r.headers
    assert db not in r.text and "payload-only" not in r.text and "Traceback" not in r.text


def _paused(config) -> bool:
    with JobQueue(config=load(config)) as q:
        return q.store.is_paused()


def test_a_dns_rebinding_host_is_refused(site):
    web, port = site["web"], site["web"].port
    with httpx.Client(base_url=web.url) as c:
        for path in ("/", f"/jobs/{site['job']}", "/jobs", "/static/app.css", "/healthz"):
            _fixed_refusal(c.get(path, headers={"Host": f"{ATTACKER}:{port}"}), 400, site["db"])
        r = c.post(
            "/actions/pause",
            data={"csrf": "x"},
            headers={"Host": f"{ATTACKER}:{port}", "Origin": f"http://{ATTACKER}:{port}"},
        )
        _fixed_refusal(r, 400, site["db"])
        assert not _paused(site["config"])
        # this machine's own names still work
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST.:{port}"):
            r = c.get(f"/jobs/{site['job']}", headers={"Host": host})
            assert r.status_code == 200 and "payload-only-the-owner-sees" in r.text


def test_a_post_from_another_origin_is_refused_even_with_a_valid_csrf_token(site):
    web, port = site["web"], site["web"].port
    with httpx.Client(base_url=web.url) as c:
        html = c.get("/").text
        token = html.split('name="csrf" value="')[1].split('"')[0]
        for origin in (
            f"http://{ATTACKER}:{port}",
            "http://evil.example",
            "http://[::1",
            "http://%zz",
        ):
            r = c.post("/actions/pause", data={"csrf": token}, headers={"Origin": origin})
            assert r.status_code == 403 and "cross-site" in r.text, (origin, r.status_code)
        assert not _paused(site["config"])
        r = c.post(
            "/actions/pause",
            data={"csrf": token, "back": "/"},
            headers={"Origin": f"http://localhost:{port}"},
        )
        assert r.status_code == 303 and _paused(site["config"])
        r = c.post(
            "/actions/resume", data={"csrf": token, "back": "/"}, headers={"Origin": web.url}
        )
        assert r.status_code == 303 and not _paused(site["config"])


def test_allow_host_adds_a_name_for_host_and_origin(site):
    web = Web(site["config"], "--allow-host", "Jobs.Example.com").wait_up()
    try:
        with httpx.Client(base_url=web.url) as c:
            assert c.get("/", headers={"Host": "jobs.example.com"}).status_code == 200
            _fixed_refusal(c.get("/", headers={"Host": f"{ATTACKER}"}), 400, site["db"])
            token = c.get("/").text.split('name="csrf" value="')[1].split('"')[0]
            r = c.post(
                "/actions/pause",
                data={"csrf": token},
                headers={"Origin": "https://jobs.example.com"},
            )
            assert r.status_code == 303 and _paused(site["config"])
            r = c.post(
                "/actions/resume", data={"csrf": token}, headers={"Origin": f"https://{ATTACKER}"}
            )
            assert r.status_code == 403 and _paused(site["config"])
            assert c.post("/actions/resume", data={"csrf": token}).status_code == 303
    finally:
        web.close()


@pytest.mark.parametrize(
    "value", ["jobs.example.com/x", "https://jobs.example.com", "jobs:8080", ""]
)
def test_a_bad_allow_host_is_refused_at_start(tmp_path, value):
    config = write_config(tmp_path, handlers=[])
    r = subprocess.run(
        [sys.executable, "-m", "supervisor", "web", "--config", str(config), "--allow-host", value],
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "--allow-host" in r.stderr and "is not a host name" in r.stderr


def test_non_ascii_tokens_and_csrf_values_are_refusals_never_errors(site):
    web = Web(site["config"], "--token", "t0ken").wait_up()
    bad = "jétön"
    try:
        with httpx.Client(base_url=web.url) as c:
            for path in ("/", "/jobs", "/static/app.css"):
                _fixed_refusal(c.get(path, params={"token": bad}), 401, site["db"])
                _fixed_refusal(
                    c.get(path, headers={"Authorization": f"Bearer {bad}".encode()}),
                    401,
                    site["db"],
                )
                _fixed_refusal(
                    c.get(path, headers={"Cookie": f"jobq_token={bad}".encode()}), 401, site["db"]
                )
            for headers in (
                {"Authorization": f"Bearer {bad}".encode()},
                {"Cookie": f"jobq_token={bad}".encode()},
            ):
                _fixed_refusal(
                    c.post("/actions/pause", data={"csrf": bad}, headers=headers), 401, site["db"]
                )
            ok = {"Authorization": "Bearer t0ken"}
            assert c.get("/static/app.css", headers=ok).status_code == 200
            r = c.post(
                "/actions/pause",
                content=f"csrf={bad}".encode(),
                headers=[
                    (b"Authorization", b"Bearer t0ken"),
                    (b"Content-Type", b"application/x-www-form-urlencoded"),
                    (b"Cookie", f"jobq_csrf={bad}".encode()),
                ],
            )
            assert r.status_code == 403 and "CSRF" in r.text
            assert "frame-ancestors" in r.headers["content-security-policy"]
        assert not _paused(site["config"])
    finally:
        web.close()


def test_error_pages_carry_the_csp(site):
    with httpx.Client(base_url=site["web"].url) as c:
        for path, status in (
            ("/nowhere", 404),
            ("/jobs/0123456789abcdef0123", 404),
            ("/jobs?status=finished", 400),
        ):
            r = c.get(path)
            assert (
                r.status_code == status
                and "frame-ancestors 'none'" in r.headers["content-security-policy"]
            )


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"], indirect=True)
def test_a_nul_in_a_filter_or_an_id_is_a_bad_request_on_every_engine(engine, tmp_path):
    extra = {"postgres": {"schema": engine.schema}} if engine.name == "postgresql" else {}
    database = engine.database if engine.name == "postgresql" else str(tmp_path / "q.db")
    config = write_config(tmp_path, handlers=[], database=database, **extra)
    with JobQueue(config=load(config)) as q:
        q.enqueue("nul:job", {"n": 1})
    web = Web(config).wait_up()
    try:
        with httpx.Client(base_url=web.url) as c:
            for path in (
                "/jobs?q=%00",
                "/jobs?type=%00",
                "/jobs?q=a%00b&text=1",
                "/jobs/%00",
                "/jobs/abc%00def",
            ):
                r = c.get(path)
                assert r.status_code == 400 and "NUL character" in r.text, (
                    path,
                    r.status_code,
                    r.text[:300],
                )
            token = c.get("/jobs").text.split('name="csrf" value="')[1].split('"')[0]
            r = c.post("/actions/jobs", data={"action": "retry", "ids": "ab\x00cd", "csrf": token})
            assert r.status_code == 400 and "NUL character" in r.text
            assert c.get("/jobs").status_code == 200  # and the connection is still good
    finally:
        web.close()

"""The dashboard (issue 15) end to end: ``jobq web`` as a real process on a real database, a real
supervisor running the jobs, and Debian's Chromium driven headless through Playwright.

Without /usr/bin/chromium (or Playwright) the browser tests skip, saying so; with
JOBQ_REQUIRE_BROWSER=1 (CI) that is a failure. Screenshots of each page go to the test's tmp
folder; with JOBQ_DOCS_IMG=1 they are copied to docs/img/ too (the README's pictures).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shared.api import JobQueue
from shared.config import load
from tests.proc import Running, env, wait_until, write_config

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
CHROMIUM = "/usr/bin/chromium"
DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"


def _browser_missing() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is missing (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; never `playwright install`)"
    return None


def _need_browser() -> None:
    why = _browser_missing()
    if why and os.environ.get("JOBQ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"JOBQ_REQUIRE_BROWSER=1 but {why}")
    if why:
        pytest.skip(why)


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Web:
    """A ``jobq web`` process; ``close()`` stops it."""

    def __init__(self, config: Path, *args: str, host: str = "127.0.0.1") -> None:
        self.port = _free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.log_path = config.parent / f"web-{self.port}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "supervisor", "web", "--config", str(config),
                                      "--host", host, "--port", str(self.port), *args],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env(), cwd=str(config.parent))

    def wait_up(self, headers: dict[str, str] | None = None) -> "Web":
        def up() -> bool:
            assert self.proc.poll() is None, self.log_path.read_text()
            try:
                return httpx.get(self.url + "/healthz", headers=headers or {}, timeout=2).status_code in (200, 401)
            except httpx.TransportError:
                return False
        wait_until(up, 30, "jobq web to answer")
        return self

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A database with a running supervisor and a dashboard on it."""
    folder = tmp_path_factory.mktemp("web")
    config = write_config(folder, handlers=["webjobs"], supervisor={"workers": 1},
                          types={"web:ok": {"concurrency": 2, "rate": "100/min"}},
                          schedule=[{"name": "nightly-report", "type": "web:ok", "cron": "0 8 * * *",
                                     "timezone": "America/New_York", "payload": {}}])
    sup = Running(config)
    web = Web(config)
    try:
        web.wait_up()
        q = JobQueue(config=load(config))
        wait_until(lambda: q.store.processes("worker"), 30, "a worker to register")
        yield {"config": config, "folder": folder, "web": web, "q": q, "sup": sup}
        q.close()
    finally:
        web.close()
        sup.close()


@pytest.fixture(scope="module")
def browser():
    _need_browser()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    # bypass_csp: the page's Content-Security-Policy would block an injected inline script by
    # itself; without it, the XSS test checks the escaping alone (and wait_for_function may eval)
    context = browser.new_context(viewport={"width": 1360, "height": 900}, bypass_csp=True)
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    yield pg
    context.close()


def shot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"dashboard-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("JOBQ_DOCS_IMG") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS_IMG / path.name)
    return path


def _status(q: JobQueue, job_id: str) -> str:
    return q.get(job_id).status


# -- in the browser ---------------------------------------------------------------------------------


def test_overview_shows_a_job_go_from_pending_to_completed_without_reload(site, page, tmp_path):
    q = site["q"]
    q.store.set_paused(True)
    try:
        page.goto(site["web"].url + "/")
        page.evaluate("window.__noReload = 'still here'")
        pending_before = int(page.inner_text("#count-pending").replace(",", ""))
        completed_before = int(page.inner_text("#count-completed").replace(",", ""))
        job_id = q.enqueue("web:ok", {"hello": "dashboard"})
        page.wait_for_function(f"document.querySelector('#count-pending').textContent.replace(/,/g, '') == "
                               f"'{pending_before + 1}'")
        assert page.inner_text("#paused") == "PAUSED"
    finally:
        q.store.set_paused(False)
    wait_until(lambda: _status(q, job_id) == "completed", 30, "the job to complete")
    page.wait_for_function(f"document.querySelector('#count-completed').textContent.replace(/,/g, '') == "
                           f"'{completed_before + 1}'")
    assert page.evaluate("window.__noReload") == "still here"  # the same page: updated live
    assert "worker" in page.inner_text("#workers")
    shot(page, tmp_path, "overview")


def test_a_failed_job_is_retried_by_clicking_and_then_runs(site, page, tmp_path):
    q = site["q"]
    flag = site["folder"] / "fail-flag"
    flag.write_text("x")
    job_id = q.enqueue("web:flaky", {"fail_while": str(flag)})
    wait_until(lambda: _status(q, job_id) == "failed", 30, "the job to fail")
    page.goto(f"{site['web'].url}/jobs/{job_id}")
    assert "flag file present" in page.inner_text("#error")
    assert "#1 failed" in page.inner_text("#attempts")
    shot(page, tmp_path, "job-failed")
    flag.unlink()
    page.click("#retry")
    page.wait_for_selector(".flash")
    assert f"retried {job_id}" in page.inner_text(".flash")  # the CLI's message
    wait_until(lambda: _status(q, job_id) == "completed", 30, "the retried job to complete")
    page.reload()
    assert page.inner_text("#job-status") == "completed"
    assert '"recovered": true' in page.inner_text("#result")
    shot(page, tmp_path, "job")


def test_a_filter_narrows_the_list(site, page, tmp_path):
    q = site["q"]
    ids = q.enqueue_many([("web:ok", {"n": i}) for i in range(3)] + [("web:echo-error", {"text": "x"})])
    wait_until(lambda: all(_status(q, i) in ("completed", "failed") for i in ids), 30, "the jobs to finish")
    page.goto(site["web"].url + "/jobs")
    everything = page.locator("table#jobs tbody tr").count()
    page.select_option("#type-filter", "web:echo-error")  # submits by itself
    page.wait_for_url("**type=web%3Aecho-error**")
    types = page.locator("table#jobs tbody tr td:nth-child(3)").all_inner_texts()
    assert types and set(types) == {"web:echo-error"} and len(types) < everything
    page.click("nav.tabs >> text=completed")
    page.wait_for_url("**status=completed**")
    assert page.inner_text("table#jobs tbody") == "no jobs"  # no web:echo-error job completed
    page.goto(site["web"].url + "/jobs?status=completed")
    assert set(page.locator("table#jobs .pill").all_inner_texts()) == {"completed"}
    shot(page, tmp_path, "jobs")


def test_a_script_in_a_payload_is_shown_as_text(site, page, tmp_path):
    q = site["q"]
    evil = "<script>window.__xss = 1</script><img src=x onerror=window.__xss=2>"
    job_id = q.enqueue("web:echo-error", {"text": evil})
    wait_until(lambda: _status(q, job_id) == "failed", 30, "the job to fail")
    for url in (f"/jobs/{job_id}", "/jobs?status=failed", f"/jobs?q={job_id[:12]}"):
        page.goto(site["web"].url + url)
        assert page.evaluate("window.__xss") is None
        assert page.locator("img[src=x]").count() == 0
    page.goto(f"{site['web'].url}/jobs/{job_id}")
    assert evil in page.inner_text("#payload") and evil in page.inner_text("#error")
    shot(page, tmp_path, "job-xss")


def test_schedules_and_types_pages(site, page, tmp_path):
    page.goto(site["web"].url + "/schedules")
    text = page.inner_text("#schedules")
    assert "nightly-report" in text and ("EST" in text or "EDT" in text)  # next runs in their zone
    shot(page, tmp_path, "schedules")
    page.goto(site["web"].url + "/types")
    assert "of 2 in use" in page.inner_text("#types") and "100/min" in page.inner_text("#types")
    shot(page, tmp_path, "types")


def test_token_required_off_loopback_and_taken_from_the_url_once(site, browser, tmp_path):
    web = Web(site["config"], "--token", "s3cret", host="127.0.0.2")
    try:
        web.wait_up()
        assert httpx.get(web.url + "/").status_code == 401
        assert httpx.get(web.url + "/jobs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(web.url + "/jobs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        context = browser.new_context()
        page = context.new_page()
        page.goto(web.url + "/jobs?token=wrong")
        assert "token required" in page.content()
        page.goto(web.url + "/jobs?status=failed&token=s3cret")
        assert page.url == web.url + "/jobs?status=failed"  # dropped from the address bar
        page.goto(web.url + "/types")  # the cookie carries it now
        assert page.locator("#types").count() == 1
        shot(page, tmp_path, "token")
        context.close()
    finally:
        web.close()

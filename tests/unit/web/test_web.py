"""The dashboard end to end: ``jobq web`` as a real process on a real database, a real
supervisor running the jobs, and Debian's Chromium driven headless through Playwright.

Without /usr/bin/chromium (or Playwright) the browser tests skip, saying so; with
JOBQ_REQUIRE_BROWSER=1 (CI) that is a failure. Screenshots of each page go to the test's tmp
folder; with JOBQ_DOCS_IMG=1 they are copied to docs/img/ too (the README's pictures).
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from shared.producer.api import JobQueue
from shared.settings.config import load
from tests.proc import Running, env, wait_until, write_config

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
CHROMIUM = "/usr/bin/chromium"
DOCS_IMG = (
    next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
    / "docs"
    / "img"
)


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
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "supervisor",
                "web",
                "--config",
                str(config),
                "--host",
                host,
                "--port",
                str(self.port),
                *args,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env(),
            cwd=str(config.parent),
        )

    def wait_up(self, headers: dict[str, str] | None = None) -> "Web":
        def up() -> bool:
            assert self.proc.poll() is None, self.log_path.read_text()
            try:
                return httpx.get(
                    self.url + "/healthz", headers=headers or {}, timeout=2
                ).status_code in (200, 401)
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
    config = write_config(
        folder,
        handlers=["webjobs"],
        supervisor={"workers": 1},
        types={"web:ok": {"concurrency": 2, "rate": "100/min"}},
        schedule=[
            {
                "name": "nightly-report",
                "type": "web:ok",
                "cron": "0 8 * * *",
                "timezone": "America/New_York",
                "payload": {},
            }
        ],
    )
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
        b = p.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
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
        page.wait_for_function(
            f"document.querySelector('#count-pending').textContent.replace(/,/g, '') == "
            f"'{pending_before + 1}'"
        )
        assert page.inner_text("#paused") == "PAUSED"
    finally:
        q.store.set_paused(False)
    wait_until(lambda: _status(q, job_id) == "completed", 30, "the job to complete")
    page.wait_for_function(
        f"document.querySelector('#count-completed').textContent.replace(/,/g, '') == "
        f"'{completed_before + 1}'"
    )
    assert page.evaluate("window.__noReload") == "still here"  # the same page: updated live
    assert "worker" in page.inner_text("#workers")
    assert "WAL" in page.inner_text(".tiles")  # SQLite has one
    shot(page, tmp_path, "overview")


def test_every_overview_table_fits_its_card_at_1280_pixels(site, page, tmp_path):
    site["q"].enqueue("web:a-long-type-name-of-a-real-application:send", {})
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(site["web"].url + "/")
    page.wait_for_selector("#by-type a")
    overflowing = page.evaluate(
        "[...document.querySelectorAll('table')].filter("
        "t => t.getBoundingClientRect().right > t.closest('.card').getBoundingClientRect().right"
        ").map(t => t.id || t.outerHTML.slice(0, 60))"
    )
    shot(page, tmp_path, "overview-1280")
    assert overflowing == []


def test_pause_and_resume_by_clicking_with_the_cli_messages(site, page):
    q = site["q"]
    page.goto(site["web"].url + "/")
    with page.expect_navigation():
        page.click("#pause-toggle")
    assert "paused: workers finish the job in hand" in page.inner_text(".flash")
    assert q.store.is_paused() and page.inner_text("#paused") == "PAUSED"
    with page.expect_navigation():
        page.click("#pause-toggle")
    assert "resumed: workers claim jobs again" in page.inner_text(".flash")
    assert not q.store.is_paused()


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
    ids = q.enqueue_many(
        [("web:ok", {"n": i}) for i in range(3)] + [("web:echo-error", {"text": "x"})]
    )
    wait_until(
        lambda: all(_status(q, i) in ("completed", "failed") for i in ids), 30, "the jobs to finish"
    )
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
    assert "none enqueued yet" in text  # first seen by the supervisor is not a tick
    shot(page, tmp_path, "schedules")
    page.goto(site["web"].url + "/types")
    assert "of 2 in use" in page.inner_text("#types") and "100/min" in page.inner_text("#types")
    shot(page, tmp_path, "types")


def test_token_required_off_loopback_and_taken_from_the_url_once(site, browser, tmp_path):
    web = Web(site["config"], "--token", "s3cret", host="127.0.0.2")
    try:
        web.wait_up()
        assert httpx.get(web.url + "/").status_code == 401
        assert (
            httpx.get(web.url + "/jobs", headers={"Authorization": "Bearer wrong"}).status_code
            == 401
        )
        assert (
            httpx.get(web.url + "/jobs", headers={"Authorization": "Bearer s3cret"}).status_code
            == 200
        )
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


def test_several_jobs_selected_and_purged(site, page, tmp_path):
    q = site["q"]
    ids = q.enqueue_many([("web:echo-error", {"text": f"bulk {i}"}) for i in range(2)])
    wait_until(lambda: all(_status(q, i) == "failed" for i in ids), 30, "the jobs to fail")
    page.goto(site["web"].url + "/jobs?status=failed&q=bulk")
    page.on("dialog", lambda d: d.accept())
    for i in ids:
        page.check(f"input[name=ids][value='{i}']")
    assert page.inner_text("#selected-count") == "2 selected"
    page.click("#bulk-purge")
    page.wait_for_selector(".flash")
    assert all(f"purged {i}" in page.inner_text(".flash") for i in ids)
    assert all(q.get(i) is None for i in ids)


# -- over HTTP ------------------------------------------------------------------------------------


def _csrf(client, url: str) -> str:
    html = client.get(url).text
    return html.split('name="csrf" value="')[1].split('"')[0]


def test_posts_need_the_csrf_token_and_keep_the_cli_rules(site):
    q = site["q"]
    job_id = q.enqueue("web:ok", None, delay=3600)
    with httpx.Client(base_url=site["web"].url) as c:
        token = _csrf(c, "/jobs")
        r = c.post("/actions/jobs", data={"action": "cancel", "ids": job_id})
        assert r.status_code == 403 and "missing CSRF token" in r.text
        r = c.post("/actions/jobs", data={"action": "cancel", "ids": job_id, "csrf": "0" * 64})
        assert r.status_code == 403 and "wrong CSRF token" in r.text
        r = c.post(
            "/actions/jobs",
            data={"action": "cancel", "ids": job_id, "csrf": token},
            headers={"Origin": "http://evil.example"},
        )
        assert r.status_code == 403 and "cross-site" in r.text
        assert _status(q, job_id) == "pending"
        r = c.post(
            "/actions/jobs",
            data={"action": "cancel", "ids": [job_id, "nope"], "csrf": token},
            follow_redirects=True,
        )
        assert f"cancelled {job_id}" in r.text and "job nope: no such job" in r.text
        assert "1 of 2 jobs not cancelled" in r.text
        r = c.post(
            "/actions/jobs",
            data={"action": "cancel", "ids": job_id, "csrf": token},
            follow_redirects=True,
        )
        assert (
            "is cancelled: cancel applies to pending and running jobs" in r.text
        )  # the CLI's rule, word for word
        assert (
            c.post(
                "/actions/jobs", data={"action": "explode", "ids": job_id, "csrf": token}
            ).status_code
            == 400
        )
        assert _status(q, job_id) == "cancelled"
        assert c.get("/actions/jobs").status_code == 405


def test_the_dashboards_cancel_and_purge_say_what_they_did(site):
    """A running job's cancel says "asked to stop", not "cancelled"; the purge of a completed
    parent that a waiting child still needs keeps it and says how many it kept and why."""
    from shared.model.job import Finish

    q = site["q"]
    pending, running = q.enqueue("web:ok", None, delay=3600), q.enqueue("web:ok", None, delay=3600)
    owner = "w:2:2"  # another host's worker, fresh: the supervisor leaves it alone
    q.store.write(
        "UPDATE jobs SET status = 'running', owner = :o, attempts = 1, "
        "started_at = run_at WHERE id = :id",
        {"o": owner, "id": running},
    )
    parent = q.enqueue("web:ok", None)
    wait_until(lambda: _status(q, parent) == "completed", 30, "the parent to complete")
    later = q.enqueue("web:ok", None, delay=3600)
    child = q.enqueue("web:ok", None, after=[parent, later])
    with httpx.Client(base_url=site["web"].url) as c:
        token = _csrf(c, "/jobs")
        form = {"action": "cancel", "ids": [pending, running], "csrf": token}
        r = c.post("/actions/jobs", data=form, follow_redirects=True)
        assert f"cancelled {pending}" in r.text and f"asked to stop {running}" in r.text
        assert f"cancelled {running}" not in r.text
        form = {"action": "purge", "ids": [parent], "csrf": token}
        r = c.post("/actions/jobs", data=form, follow_redirects=True)
        kept = "kept: a job waiting on it has yet to run and reads its result"
        assert f"job {parent}: {kept}" in r.text
        assert (
            "1 of 1 jobs not purged (kept 1: jobs waiting on them have yet to run and read "
            "their results)"
        ) in r.text
    assert _status(q, parent) == "completed" and _status(q, running) == "running"
    assert q.store.finish(Finish("cancelled", running, 1, "stopped"), owner, q.clock.now())
    assert q.cancel(later) and _status(q, child) == "cancelled"


def test_a_running_jobs_page_shows_its_progress_and_cancel_live(site):
    """A running job's page has Cancel, and a live part (its progress, a cancel asked)."""
    from shared import ops as shared_ops
    from shared.model.job import Finish

    q = site["q"]
    jid = q.enqueue("web:ok", None, delay=3600)
    owner = "w:1:1"  # another host's worker, fresh: the supervisor leaves it alone
    q.store.write(
        "UPDATE jobs SET status = 'running', owner = :o, attempts = 1, started_at = run_at "
        "WHERE id = :id",
        {"o": owner, "id": jid},
    )
    q.store.check_in(owner, [(jid, 1, '{"fraction":0.5,"note":"halfway","rows":7}')])
    html = httpx.get(f"{site['web'].url}/jobs/{jid}").text
    assert f'data-live="/live/jobs/{jid}"' in html and 'id="cancel"' in html
    assert "50% halfway (rows=7)" in html and '<progress max="1" value="0.5">' in html
    assert shared_ops.cancel_jobs(q.store, [jid], q.clock.now()) == [jid]
    live = httpx.get(f"{site['web'].url}/live/jobs/{jid}").text
    assert 'id="cancelling"' in live and "halfway" in live and "<html" not in live
    assert q.store.check_in(owner) == {jid}
    assert q.store.finish(Finish("cancelled", jid, 1, "stopped"), owner, q.clock.now())
    assert "halfway" in httpx.get(f"{site['web'].url}/jobs/{jid}").text  # kept after the end
    assert (
        httpx.get(site["web"].url + "/").status_code == 200
    )  # a cancelled attempt in the chart's minutes


def test_a_job_run_again_after_an_interrupted_run_shows_that_run_and_no_stale_error(
    site, page, tmp_path
):
    """A run killed in a shutdown (its attempt given back) is on the job's timeline with its
    reason; while the job runs again, its page shows no error. Claimed two hours ahead, on a
    worker of another host, so the site's own worker never takes it."""
    q = site["q"]
    owner, later = "w:2:1", q.clock.now() + 7200
    jid = q.enqueue("web:ok", None, delay=3600, priority=100)
    [job] = q.store.claim(owner, 2, later, 1)
    assert job.id == jid
    q.store.release_owner(
        owner, "shutdown_timeout passed", later, max_attempts_for=lambda j: 3, count_attempt=False
    )
    assert q.get(jid).error == "shutdown_timeout passed"
    [job] = q.store.claim(owner, 2, later, 1)
    assert (job.id, job.attempts) == (jid, 1)
    page.goto(f"{site['web'].url}/jobs/{jid}")
    assert page.inner_text("#job-status") == "running"
    assert page.query_selector("#error") is None
    attempts = page.inner_text("#attempts")
    assert "#1 interrupted" in attempts and "shutdown_timeout passed" in attempts
    shot(page, tmp_path, "job-run-again")


def test_a_failed_jobs_row_shows_its_exception_not_the_messages_last_line(site, page, tmp_path):
    """httpx's error ends with a pointer to the docs: the row shows the exception and the first
    line (also of a traceback longer than the tail the listing reads); the job's page keeps the
    whole text."""
    from shared.model.job import Finish

    q = site["q"]
    owner, later = "w:3:1", q.clock.now() + 7200
    jid = q.enqueue("web:ok", None, delay=3600, priority=100)
    [job] = q.store.claim(owner, 3, later, 1)
    frames = "".join(f'  File "send.py", line {i}, in send\n    retry(send)\n' for i in range(60))
    tb = (
        "Traceback (most recent call last):\n"
        + frames
        + "httpx.HTTPStatusError: Server error '503 Service Unavailable' for url 'https://x.test'\n"
        "For more information check: https://developer.mozilla.org/503"
    )
    assert q.store.finish(Finish("failed", jid, job.attempts, tb, 0.0, 1), owner, later)
    page.goto(f"{site['web'].url}/jobs?status=failed")
    row = page.inner_text(f"tr:has(a[title='{jid}'])")
    assert "httpx.HTTPStatusError: Server error '503" in row and "For more information" not in row
    page.goto(f"{site['web'].url}/jobs/{jid}")
    assert "For more information check" in page.inner_text("#error")
    shot(page, tmp_path, "job-row-error")


def test_the_jobs_of_one_batch_are_told_apart(site):
    """Ids share their first 12 digits (the enqueue time): the list shows 20, the full id on hover."""
    ids = site["q"].enqueue_many([("web:ok", {"batch": i}, {"delay": 3600}) for i in range(3)])
    html = httpx.get(site["web"].url + "/jobs?status=pending").text
    for i in ids:
        assert f'title="{i}">{i[:20]}…</a>' in html


def test_bad_input_gets_clear_pages_never_a_traceback(site):
    with httpx.Client(base_url=site["web"].url) as c:
        r = c.get("/jobs/0123456789abcdef")
        assert r.status_code == 404 and "no job has that id" in r.text
        r = c.get("/jobs?status=finished")
        assert r.status_code == 400 and "status &#39;finished&#39; is not one of" in r.text
        r = c.get("/jobs?status=pending&after=zzzz")
        assert r.status_code == 400 and "is not a page cursor" in r.text
        assert "Traceback" not in r.text


def test_read_only_hides_and_refuses_actions(site):
    web = Web(site["config"], "--read-only")
    try:
        web.wait_up()
        with httpx.Client(base_url=web.url) as c:
            html = c.get("/jobs?status=failed").text
            assert (
                "read-only" in html and "bulk-retry" not in html and 'type="checkbox"' not in html
            )
            assert "Pause queue" not in c.get("/").text
            r = c.post("/actions/pause", data={"csrf": "x"})
            assert r.status_code == 403 and "read-only" in r.text
        assert not site["q"].store.is_paused()
    finally:
        web.close()


def test_root_path_prefixes_every_link(site):
    web = Web(site["config"], "--root-path", "/jobq/")
    try:
        web.wait_up()
        with httpx.Client(base_url=web.url) as c:
            html = c.get("/jobs?status=failed").text
            assert 'href="/jobq/static/app.css"' in html and 'href="/jobq/schedules"' in html
            assert (
                'action="/jobq/actions/jobs"' in html
                and 'name="back" value="/jobs?status=failed"' in html
            )
            assert c.get("/static/app.js").status_code == 200
            token = _csrf(c, "/jobs")
            # the cookies' Path is /jobq (what the browser sees through the proxy): send them by hand
            cookie = f"jobq_csrf={c.cookies.get('jobq_csrf', path='/jobq')}"
            r = c.post(
                "/actions/jobs",
                data={
                    "action": "retry",
                    "ids": "nope",
                    "csrf": token,
                    "back": "/jobs?status=failed",
                },
                headers={"Cookie": cookie},
            )
            assert r.status_code == 303 and r.headers["location"].startswith(
                "/jobq/jobs?status=failed&done="
            )
    finally:
        web.close()
    web = Web(site["config"], "--root-path", "/jobq", "--token", "t0k")
    try:
        web.wait_up()
        r = httpx.get(web.url + "/types?token=t0k")
        assert r.status_code == 303 and r.headers["location"] == "/jobq/types"
    finally:
        web.close()


def test_a_statement_the_database_refuses_is_an_error_page_not_unavailable(tmp_path):
    config = write_config(tmp_path, database="q.db", handlers=[])
    JobQueue(config=load(config)).close()  # jobq's schema, then a table of it dropped
    with sqlite3.connect(tmp_path / "q.db") as c:
        c.execute("DROP TABLE jobs")
    web = Web(config)
    try:
        web.wait_up()
        r = httpx.get(web.url + "/jobs")
        assert r.status_code == 500 and "Database error" in r.text
        assert "no such table: jobs" in r.text
        assert "unavailable" not in r.text and "Traceback" not in r.text
    finally:
        web.close()


def test_a_database_that_cannot_be_opened_is_an_error_page(tmp_path):
    config = write_config(tmp_path, database="missing-folder/q.db", handlers=[])
    web = Web(config)
    try:
        web.wait_up()
        r = httpx.get(web.url + "/")
        assert (
            r.status_code == 503 and "Database unavailable" in r.text and "missing-folder" in r.text
        )
        assert "Traceback" not in r.text
    finally:
        web.close()


def test_other_addresses_need_a_token_to_start(tmp_path):
    config = write_config(tmp_path, handlers=[])
    r = subprocess.run(
        [sys.executable, "-m", "supervisor", "web", "--config", str(config), "--host", "0.0.0.0"],
        env={k: v for k, v in env().items() if k != "JOBQ_WEB_TOKEN"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "give --token" in r.stderr


def test_the_dashboard_on_postgresql(tmp_path, page):
    """``jobq web`` against a postgresql:// database (a schema of its own, dropped after): the
    overview, the job listing (a status tab, a filter, the search) and a job's page render."""
    from shared.model.job import Finish
    from tests.engines import PostgresEngine

    db = PostgresEngine(tmp_path)  # skips without a server unless JOBQ_REQUIRE_POSTGRES=1
    config = write_config(
        tmp_path,
        database=db.database,
        postgres={"schema": db.schema},
        types={"web:ok": {"rate": "100/min"}},
    )
    web = None
    try:
        with JobQueue(config=load(config)) as q:
            ids = q.enqueue_many(
                [("web:ok", {"n": i}) for i in range(4)] + [("web:bad", {"needle": "x"})]
            )
            for j in q.store.claim("w:1:1", 1, q.clock.now(), 5):
                bad = j.type == "web:bad"
                q.store.finish(
                    Finish(
                        "failed" if bad else "completed",
                        j.id,
                        j.attempts,
                        "boom" if bad else '"ok"',
                    ),
                    j.owner,
                    q.clock.now(),
                )
            later = q.enqueue("web:ok", {"n": "later"}, delay=3600)
        web = Web(config).wait_up()
        page.goto(web.url + "/")
        page.wait_for_selector("#count-completed")
        assert (
            page.inner_text("#count-completed") == "4" and page.inner_text("#count-failed") == "1"
        )
        assert "WAL" not in page.inner_text(".tiles")  # no log of jobq's own to show as "0 B"
        shot(page, tmp_path, "postgres-overview")
        page.goto(web.url + "/jobs?status=completed")
        assert set(page.locator("table#jobs .pill").all_inner_texts()) == {"completed"}
        assert page.locator("table#jobs tbody tr").count() == 4
        page.goto(web.url + "/jobs?q=needle")
        assert page.locator("table#jobs tbody tr").count() == 1 and "web:bad" in page.inner_text(
            "table#jobs"
        )
        page.goto(web.url + "/jobs?status=pending")
        assert later[:12] in page.inner_text("table#jobs")
        shot(page, tmp_path, "postgres-jobs")
        page.goto(f"{web.url}/jobs/{ids[-1]}")
        assert "boom" in page.inner_text("#error") and '"needle"' in page.inner_text("#payload")
        assert "#1 failed" in page.inner_text("#attempts")
        shot(page, tmp_path, "postgres-job")
    finally:
        if web is not None:
            web.close()
        db.drop()


def test_a_queue_is_paused_and_resumed_from_its_own_button(site):
    q = site["q"]
    q.enqueue("web:ok", None, queue="web-reports", delay=3600)
    with httpx.Client(base_url=site["web"].url) as c:
        html = c.get("/").text
        assert 'id="queues"' in html and "web-reports" in html
        token = _csrf(c, "/")
        r = c.post(
            "/actions/pause",
            data={"csrf": token, "queue": "web-reports", "back": "/"},
            follow_redirects=True,
        )
        assert (
            r.status_code == 200
            and q.store.is_queue_paused("web-reports")
            and not q.store.is_paused()
        )
        assert c.post("/actions/pause", data={"csrf": token, "queue": "a,b"}).status_code == 400
        c.post(
            "/actions/resume",
            data={"csrf": token, "queue": "web-reports", "back": "/"},
            follow_redirects=True,
        )
        assert not q.store.is_queue_paused("web-reports")
        assert "waiting on a limit" in c.get("/types").text


def test_the_overview_names_a_queue_no_worker_serves(engine, tmp_path, page):
    import warnings
    from shared.model.unserved import UnservedQueueWarning

    where = {"postgres": {"schema": engine.schema}} if engine.name == "postgresql" else {}
    config = write_config(
        tmp_path,
        handlers=[],
        database=engine.database,
        supervisor={"workers": 2},
        queues={"reports": {"workers": 1}},
        **where,
    )
    web = None
    try:
        with JobQueue(config=load(config)) as q, warnings.catch_warnings():
            warnings.simplefilter("ignore", UnservedQueueWarning)
            q.enqueue_many(
                [("web:ok", {}, {"queue": "newsletters"}), ("web:ok", {}, {"queue": "reports"})]
            )
        web = Web(config).wait_up()
        page.goto(web.url + "/")
        assert (
            page.inner_text("#unserved").splitlines()[0]
            == "no worker serves queue newsletters: 1 pending"
        )
        assert "reports" not in page.inner_text("#unserved")
        assert "no worker" in page.inner_text("#queue-newsletters")
        assert "no worker" not in page.inner_text("#queue-reports")
        shot(page, tmp_path, f"unserved-{engine.name}")
    finally:
        if web is not None:
            web.close()

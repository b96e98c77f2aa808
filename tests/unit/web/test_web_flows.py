"""The dashboard's job page shows a job's workflow: the graph's progress and links to
its parents and children, over real HTTP to a real ``jobq web`` process."""

from __future__ import annotations

import pytest

from shared.producer.api import JobQueue
from shared.settings.config import load
from tests.proc import write_config
from tests.unit.web.test_web import Web

httpx = pytest.importorskip("httpx")


def test_job_page_links_parents_and_children_with_the_graphs_progress(tmp_path):
    config = write_config(tmp_path, handlers=[])
    with JobQueue(config=load(config)) as q:
        a, b = q.enqueue("flow:a"), q.enqueue("flow:b")
        c = q.enqueue("flow:c", after=[a, b])
        d = q.enqueue("flow:d", after=[c])
        plain = q.enqueue("flow:plain")
    web = Web(config).wait_up()
    try:
        with httpx.Client(base_url=web.url) as client:
            page = client.get(f"/jobs/{c}").text
            assert 'id="workflow"' in page and "2 pending" in page and "2 waiting" in page
            for job_id in (a, b, d):
                assert f'/jobs/{job_id}"' in page
            assert page.index(f"/jobs/{a}") < page.index(f"/jobs/{b}") < page.index(f"/jobs/{d}")
            assert 'value="cancel"' in page  # a waiting job can be cancelled
            assert 'id="workflow"' not in client.get(f"/jobs/{plain}").text
            listing = client.get("/jobs?status=waiting")
            assert (
                listing.status_code == 200
                and f"/jobs/{c}" in listing.text
                and f"/jobs/{d}" in listing.text
            )
            assert f"/jobs/{a}" not in listing.text
    finally:
        web.close()

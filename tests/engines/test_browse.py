"""The dashboard's job listing (shared.ops.browse): keyset pages visit every match once, in the
listing order, also when a filter needs several bounded windows; bad parameters are refused.
On every engine (the ``engine`` fixture); the expected lists are computed from the jobs in Python."""

from __future__ import annotations

import pytest

from shared.ops import browse
from shared.producer.api import JobQueue
from shared.runtime.clock import FakeClock
from shared.model.job import Finish


@pytest.fixture
def q(engine):
    clock = FakeClock()
    with JobQueue(config=engine.config(), clock=clock) as q:
        q.ids = []  # every job's id, for the expected lists
        for i in range(60):
            clock.advance(1)
            q.ids += [
                q.enqueue(
                    "even" if i % 2 == 0 else "odd",
                    {"i": i, "tag": "needle" if i % 17 == 0 else "hay"},
                    priority=i % 3,
                    delay=(i % 5) * 10,
                    key=f"k{i}",
                )
            ]
        yield q


def _all_pages(store, params, limit=7, window=10):
    seen, after, pages = [], None, 0
    while True:
        f = browse.parse_filter({**params, **({"after": after} if after else {})})
        page = browse.page_jobs(store, f, limit=limit, window=window)
        seen += [r["id"] for r in page.rows]
        pages += 1
        assert pages < 100
        if page.next is None:
            return seen
        after = page.next


def _expected(q, keep=lambda j: True, claim=False):
    """Ids of the jobs ``keep`` accepts: newest first, or in claim order (created_at differs
    between any two jobs here, so no engine's tiebreak is needed)."""
    jobs = [q.store.get(i) for i in q.ids]
    jobs = [j for j in jobs if keep(j)]
    if claim:
        return [j.id for j in sorted(jobs, key=lambda j: (-j.priority, j.run_at, j.created_at))]
    return sorted((j.id for j in jobs), reverse=True)


def test_pending_pages_follow_claim_order(q):
    got = _all_pages(q.store, {"status": "pending"})
    assert got == _expected(q, lambda j: j.status == "pending", claim=True)
    assert len(got) == 60


def test_filtered_pages_walk_windows_and_miss_nothing(q):
    got = _all_pages(q.store, {"status": "pending", "type": "odd"}, limit=4, window=5)
    assert got == _expected(q, lambda j: j.status == "pending" and j.type == "odd", claim=True)
    got = _all_pages(q.store, {"q": "needle"}, limit=2, window=5)
    assert got == _expected(q, lambda j: j.payload["tag"] == "needle")


def test_finished_lists_newest_first(q):
    s = q.store
    for j in s.claim("w:1:1", 1, q.clock.now() + 1000, limit=60):
        failed = j.payload["i"] % 4 == 0
        s.finish(
            Finish(
                "failed" if failed else "completed", j.id, j.attempts, "boom" if failed else None
            ),
            j.owner,
            q.clock.now(),
        )
    assert _all_pages(s, {"status": "failed"}) == _expected(q, lambda j: j.status == "failed")
    assert _all_pages(s, {"status": "completed", "type": "even"}, window=3) == _expected(
        q, lambda j: j.status == "completed" and j.type == "even"
    )
    assert _all_pages(s, {}) == _expected(q)


def test_search_finds_id_prefix_and_key_first(q):
    some = _expected(q)[5]
    page = browse.page_jobs(q.store, browse.parse_filter({"q": some[:20]}))
    assert [r["id"] for r in page.exact] == [some] and page.text_skipped and not page.rows
    page = browse.page_jobs(q.store, browse.parse_filter({"q": some[:20], "text": "1"}))
    assert [r["id"] for r in page.exact] == [some] and [r["id"] for r in page.rows] == [some]
    page = browse.page_jobs(q.store, browse.parse_filter({"q": "k3"}))
    assert [r["key"] for r in page.exact] == ["k3"]


@pytest.mark.parametrize(
    "params, reason",
    [
        ({"status": "done"}, "status 'done' is not one of"),
        ({"after": "!!"}, "is not a page cursor"),
        ({"status": "pending", "after": browse.encode_cursor(("x",))}, "is not a page cursor"),
        ({"q": "x" * 500}, "at most 200"),
    ],
)
def test_bad_parameters_name_the_problem(params, reason):
    with pytest.raises(ValueError, match=reason):
        browse.parse_filter(params)

"""The dashboard's job listing (shared.browse): keyset pages visit every match once, in the
listing order, also when a filter needs several bounded windows; bad parameters are refused."""
from __future__ import annotations

import pytest

from shared import browse
from shared.api import JobQueue
from shared.clock import FakeClock
from shared.config import Config
from shared.job import Finish


@pytest.fixture
def q(tmp_path):
    clock = FakeClock()
    with JobQueue(config=Config(database=str(tmp_path / "q.db")), clock=clock) as q:
        for i in range(60):
            clock.advance(1)
            q.enqueue("even" if i % 2 == 0 else "odd", {"i": i, "tag": "needle" if i % 17 == 0 else "hay"},
                      priority=i % 3, delay=(i % 5) * 10, key=f"k{i}")
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


def _expected(store, where="1", order="id DESC", params=()):
    return [r["id"] for r in store.conn.execute(f"SELECT id FROM jobs WHERE {where} ORDER BY {order}", params)]


def test_pending_pages_follow_claim_order(q):
    got = _all_pages(q.store, {"status": "pending"})
    assert got == _expected(q.store, "status = 'pending'", "priority DESC, run_at, created_at, rowid")
    assert len(got) == 60


def test_filtered_pages_walk_windows_and_miss_nothing(q):
    got = _all_pages(q.store, {"status": "pending", "type": "odd"}, limit=4, window=5)
    assert got == _expected(q.store, "status = 'pending' AND type = 'odd'", "priority DESC, run_at, created_at, rowid")
    got = _all_pages(q.store, {"q": "needle"}, limit=2, window=5)
    assert got == _expected(q.store, "instr(payload, 'needle') > 0")


def test_finished_lists_newest_first(q):
    s = q.store
    for j in s.claim("w:1:1", 1, q.clock.now() + 1000, limit=60):
        failed = j.payload["i"] % 4 == 0
        s.finish(Finish("failed" if failed else "completed", j.id, j.attempts, "boom" if failed else None),
                 j.owner, q.clock.now())
    assert _all_pages(s, {"status": "failed"}) == _expected(s, "status = 'failed'")
    assert _all_pages(s, {"status": "completed", "type": "even"}, window=3) == \
        _expected(s, "status = 'completed' AND type = 'even'")
    assert _all_pages(s, {}) == _expected(s)


def test_search_finds_id_prefix_and_key_first(q):
    some = _expected(q.store)[5]
    page = browse.page_jobs(q.store, browse.parse_filter({"q": some[:14]}))
    assert [r["id"] for r in page.exact] == [some] and page.text_skipped and not page.rows
    page = browse.page_jobs(q.store, browse.parse_filter({"q": some[:14], "text": "1"}))
    assert [r["id"] for r in page.exact] == [some] and [r["id"] for r in page.rows] == [some]
    page = browse.page_jobs(q.store, browse.parse_filter({"q": "k3"}))
    assert [r["key"] for r in page.exact] == ["k3"]


@pytest.mark.parametrize("params, reason", [
    ({"status": "done"}, "status 'done' is not one of"),
    ({"after": "!!"}, "is not a page cursor"),
    ({"status": "pending", "after": browse.encode_cursor(("x",))}, "is not a page cursor"),
    ({"q": "x" * 500}, "at most 200"),
])
def test_bad_parameters_name_the_problem(params, reason):
    with pytest.raises(ValueError, match=reason):
        browse.parse_filter(params)

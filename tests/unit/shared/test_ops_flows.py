"""shared.ops.flows: a job's place in its workflow, read from a real SQLite file, and the
lines ``jobq show`` prints of it."""

from __future__ import annotations

from shared.engines import open_store
from shared.ops.flows import relatives, relatives_text
from shared.producer.api import JobQueue
from shared.runtime.clock import FakeClock
from shared.settings.config import from_dict


def test_parents_children_and_the_whole_graph(tmp_path):
    cfg = from_dict({"database": str(tmp_path / "jobs.db")})
    with JobQueue(config=cfg, clock=FakeClock()) as q:
        a, b = q.enqueue("extract", {}), q.enqueue("extract", {})
        c = q.enqueue("load", {}, after=[b, a])
        d = q.enqueue("report", {}, after=[c])
        alone = q.enqueue("other", {})
        store = open_store(cfg)
        try:
            rel = relatives(store, c)
            lone = relatives(store, alone)
        finally:
            store.close()
    assert [p["id"] for p in rel["parents"]] == [b, a]  # in the order given
    assert [(x["id"], x["status"]) for x in rel["children"]] == [(d, "waiting")]
    assert rel["graph"] == {"pending": 2, "waiting": 2}
    assert lone == {"parents": [], "children": [], "graph": {}}
    assert relatives_text(lone) == ""
    text = relatives_text(rel).splitlines()
    assert text[:3] == ["", "workflow: 2 pending, 2 waiting", "parents:"]
    assert text[3] == f"  {b}  extract  pending" and text[-2] == "children:"


def test_a_deleted_parent_shows_as_deleted():
    rel = {
        "parents": [{"id": "p1", "type": None, "status": None}],
        "children": [],
        "graph": {"waiting": 1},
    }
    assert relatives_text(rel) == "\nworkflow: 1 waiting\nparents:\n  p1  -  deleted"

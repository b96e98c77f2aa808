"""``jobq enqueue --after``, ``jobq show``'s workflow lines, and ``jobq cancel``/``retry`` of a
parent."""

from __future__ import annotations

from tests.unit.cli.test_cli import as_json, cfg, fail_job, jobq, ok  # noqa: F401 - cfg: a fixture


def test_enqueue_after_show_and_cancel_of_a_parent(cfg):  # noqa: F811
    a = ok(jobq(cfg, "enqueue", "ops:ok", "1")).strip()
    b = ok(jobq(cfg, "enqueue", "ops:ok", "2")).strip()
    c = ok(
        jobq(cfg, "enqueue", "ops:ok", "--after", a, "--after", b[:16])
    ).strip()  # an id or a unique prefix
    h = ok(jobq(cfg, "enqueue", "ops:ok", "--after", c, "--after-failure", "hold")).strip()
    data = as_json(jobq(cfg, "show", c, "--json"))
    assert data["job"]["status"] == "waiting"
    assert [p["id"] for p in data["parents"]] == [a, b] and [k["id"] for k in data["children"]] == [
        h
    ]
    assert data["graph"] == {"pending": 2, "waiting": 2}
    out = ok(jobq(cfg, "show", c))
    assert "workflow: 2 pending, 2 waiting" in out and f"  {a}  ops:ok  pending" in out
    r = jobq(cfg, "enqueue", "ops:ok", "--after", "f" * 32)
    assert r.returncode != 0 and f"parent job {'f' * 32} not found" in r.stderr
    ok(jobq(cfg, "cancel", a))
    for job_id, status in (
        (c, "cancelled"),
        (h, "cancelled"),
    ):  # the hold child too: an operator's cancel
        assert as_json(jobq(cfg, "show", job_id, "--json"))["job"]["status"] == status
    assert (
        f"parent job {a} (ops:ok) cancelled"
        in as_json(jobq(cfg, "show", c, "--json"))["job"]["error"]
    )


def test_retry_of_a_failed_parent_lets_a_held_child_go_on(cfg):  # noqa: F811
    a = ok(jobq(cfg, "enqueue", "ops:ok")).strip()
    h = ok(jobq(cfg, "enqueue", "ops:ok", "--after", a, "--after-failure", "hold")).strip()
    fail_job(cfg, a)
    assert as_json(jobq(cfg, "show", h, "--json"))["job"]["status"] == "waiting"
    ok(jobq(cfg, "retry", a))
    assert (
        as_json(jobq(cfg, "show", h, "--json"))["job"]["status"] == "waiting"
    )  # until it completes
    assert as_json(jobq(cfg, "show", a, "--json"))["children"][0]["status"] == "waiting"


def test_copy_carries_waiting_jobs_by_default_and_when_named():
    """Workflows travel with ``jobq copy`` (their edges with them): waiting jobs are in the
    default statuses (every status but running), in ``all``, and may be named."""
    from supervisor.cli.copycmd import parse_statuses

    assert parse_statuses(None) == ("waiting", "pending", "completed", "failed", "cancelled")
    assert "waiting" in parse_statuses(["all"])
    assert parse_statuses(["pending,waiting"]) == ("pending", "waiting")

"""A job type's second and later plain enqueues (``q.enqueue(type, payload)``) take a shorter
path than the first (shared.producer.api): they must store the same job and refuse the same
input, whatever changed between the calls that enqueue depends on."""

from __future__ import annotations

import warnings

import pytest

from shared.producer.api import JobQueue
from shared.runtime.clock import parse_iso
from shared.settings.config import load
from shared.producer.typecheck import UnservedTypeWarning
from tests.conftest import make_config

pytestmark = pytest.mark.engines


def _stored(q: JobQueue, job_id: str) -> tuple:
    j = q.get(job_id)
    return (
        j.type,
        j.payload,
        j.priority,
        j.queue,
        j.limit_key,
        j.max_attempts,
        j.status,
        j.run_at == j.created_at,
    )


def test_repeated_plain_enqueues_store_what_the_first_stored(tmp_path, database, clock):
    path = make_config(
        tmp_path, types={"mail": {"priority": 5, "queue": "emails", "key": "payload.to"}}
    )
    q = JobQueue(config=load(path), clock=clock)
    try:
        ids = [q.enqueue("mail", {"to": f"u{i}"}) for i in range(3)] + [
            q.enqueue("plain", None) for _ in range(2)
        ]
        clock.advance(1.5)
        ids.append(q.enqueue("mail", {"to": 7}))
        rows = [_stored(q, i) for i in ids]
        assert rows[:3] == [
            ("mail", {"to": f"u{i}"}, 5, "emails", f"u{i}", None, "pending", True) for i in range(3)
        ]
        assert rows[3] == rows[4] == ("plain", None, 0, "default", None, None, "pending", True)
        assert rows[5] == ("mail", {"to": 7}, 5, "emails", "7", None, "pending", True)
        assert len(set(ids)) == len(ids)
        assert (
            parse_iso(q.get(ids[5]).created_at) == parse_iso(q.get(ids[0]).created_at) + 1.5
        )  # per call
        with pytest.raises(
            ValueError, match="has no payload.to"
        ):  # the key path is still read per job
            q.enqueue("mail", {})
        with pytest.raises(TypeError, match="not JSON-serialisable"):
            q.enqueue("mail", {"to": "x", "bad": object()})
        with pytest.raises(ValueError, match="max_payload_bytes"):
            q.enqueue("plain", "x" * (q.config.max_payload_bytes + 1))
        assert q.counts()["pending"] == 6  # the refused ones wrote nothing
    finally:
        q.close()


def test_a_new_config_or_type_check_applies_to_the_next_plain_enqueue(tmp_path, database, clock):
    q = JobQueue(config=load(make_config(tmp_path, types={"t": {"priority": 1}})), clock=clock)
    try:
        first = q.enqueue("t", None)
        q.config = load(make_config(tmp_path, types={"t": {"priority": 9, "queue": "other"}}))
        second = q.enqueue("t", None)
        assert [(q.get(i).priority, q.get(i).queue) for i in (first, second)] == [
            (1, "default"),
            (9, "other"),
        ]
        q.config = q.config.replace(strict_types=True)
        q.check_types()  # no handler serves "t": refused from now on, every time
        for _ in range(2):
            with pytest.raises(ValueError, match="strict_types"):
                q.enqueue("t", None)
    finally:
        q.close()


def test_an_unserved_type_is_warned_about_once_and_its_later_enqueues_still_write(
    tmp_path, database, clock
):
    q = JobQueue(config=load(make_config(tmp_path)), clock=clock).check_types()
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            ids = [q.enqueue("nobody:serves", None) for _ in range(3)]
        assert [w.category for w in seen] == [UnservedTypeWarning]
        assert all(q.get(i).status == "pending" for i in ids)
    finally:
        q.close()


def test_an_unserved_type_warning_points_at_the_callers_line_on_every_path(
    tmp_path, database, clock
):
    """enqueue, enqueue_many and a task's enqueue each warn at the application's line, not
    inside jobq (where Python's default filter would show one warning for every caller)."""
    import jobq

    @jobq.task(name="nobody:serves-task")
    def unserved_task() -> None: ...

    calls = {
        "enqueue": lambda q: q.enqueue("nobody:serves-1", None),
        "enqueue_many": lambda q: q.enqueue_many([("nobody:serves-2", None)]),
        "task": lambda q: unserved_task.enqueue(),
    }
    q = JobQueue(config=load(make_config(tmp_path)), clock=clock).check_types()
    jobq.configure(q)
    try:
        for name, call in calls.items():
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                call(q)
            assert [(w.category, w.filename) for w in seen] == [(UnservedTypeWarning, __file__)], (
                name
            )
    finally:
        jobq.configure(None)
        q.close()

"""shared.producer.duplicates: what a deduplicated enqueue names as not applied, and when it
warns (a repeat of the same call is silent)."""

from __future__ import annotations

import warnings

from shared.model.job import Job, NewJob
from shared.model.uniqueness import unique_scope
from shared.producer.duplicates import DuplicateJobWarning, answered, not_applied, report
from shared.runtime.clock import iso

NOW = 1_700_000_000.0


def _kept(**over) -> Job:
    row = {
        "id": "old",
        "type": "t",
        "status": "pending",
        "payload": '{"a": 1}',
        "result": None,
        "error": None,
        "started_at": None,
        "completed_at": None,
        "attempts": 0,
        "max_attempts": 3,
        "priority": 0,
        "run_at": iso(NOW - 5),
        "created_at": iso(NOW - 5),
        "updated_at": iso(NOW - 5),
        "key": "k",
        "queue": "default",
        **over,
    }
    return Job.from_row(row)


def _new(**over) -> NewJob:
    fields = {"id": "new", "type": "t", "payload": '{"a": 1}', "priority": 0, "run_at": NOW}
    fields.update({"max_attempts": None, "key": "k", **over})
    return NewJob(**fields)


def test_a_repeat_of_the_same_call_applies_nothing_new():
    assert not_applied(_new(), _kept(), NOW) == []


def test_each_differing_option_is_named_with_the_value_the_job_keeps():
    new = _new(payload='{"a": 2}', priority=5, run_at=NOW + 60, max_attempts=9, queue="q")
    dropped = not_applied(new, _kept(), NOW)
    assert dropped[0] == "payload (the job keeps its own)"
    assert "priority=5 (the job keeps 0)" in dropped
    assert "queue='q' (the job keeps 'default')" in dropped
    assert "max_attempts=9 (the job keeps 3)" in dropped
    assert any(d.startswith("run_at=") for d in dropped)
    assert not_applied(_new(after=("p",)), _kept(), NOW) == [
        "after=['p'] (the job keeps its own parents)"
    ]


def test_a_derived_key_stands_for_the_same_arguments_however_they_are_spelt():
    new = _new(key="unique:t:abc", payload='{"args": [], "kwargs": {"a": 1}}')
    assert not_applied(new, _kept(payload='{"args": [1], "kwargs": {}}'), NOW) == []


def test_report_warns_once_per_answered_job_whose_options_differ():
    jobs = [_new(id="n1"), _new(id="n2", priority=4), _new(id="n3")]
    ids = ["old", "old", "n3"]
    assert answered(jobs, ids) == ["old", "old"]
    jobs[1].unique = unique_scope("pending")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        report(lambda i: _kept(), jobs, ids, NOW)
    assert [w.category for w in seen] == [DuplicateJobWarning]
    text = str(seen[0].message)
    assert "key 'k' is held by job old (pending) within unique='pending'" in text
    assert text.endswith("did not apply priority=4 (the job keeps 0)")

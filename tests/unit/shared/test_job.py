"""shared.model.job: ids, decoding stored JSON, JSON as every reader can decode it, releasing
a dead owner's job, and recognising an outcome that committed before."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from shared.model import job as jobmod
from shared.model.bounds import MAX_DEPTH
from shared.model.job import Finish, Job, encode_json, history_row, recognised, release_outcome
from shared.runtime.clock import iso


def test_ids_are_32_hex_digits_unique_and_ordered_by_time(monkeypatch):
    ids = jobmod.new_ids(50)
    assert len(set(ids)) == 50 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert jobmod.new_ids(0) == []
    monkeypatch.setattr(jobmod.time, "time", lambda: 1000.0)
    early = jobmod.new_id()
    monkeypatch.setattr(jobmod.time, "time", lambda: 1000.001)
    assert jobmod.new_id()[:12] > early[:12]


def row(**over):
    base = dict(
        id="j",
        type="t",
        status="pending",
        payload='{"a":1}',
        result=None,
        error=None,
        attempts=0,
        max_attempts=3,
        priority=0,
        run_at="x",
        started_at=None,
        completed_at=None,
        created_at="x",
        updated_at="x",
        unknown="ignored",
    )
    return {**base, **over}


def test_a_row_that_is_not_json_keeps_its_text_and_says_why():
    assert Job.from_row(row()).payload == {"a": 1}
    bad = Job.from_row(row(payload="{nope"))
    assert bad.payload == "{nope" and bad.payload_error.startswith("not valid JSON")
    deep = Job.from_row(row(payload="[" * 100_000 + "]" * 100_000))
    assert "nested too deep" in deep.payload_error
    assert jobmod.decoded("null") is None and jobmod.decoded("nope") == "nope"


def test_encode_json():
    assert encode_json(None, "x") == "null"
    assert encode_json({"b": [1, "é"]}, "x") == '{"b":[1,"é"]}'
    assert json.loads(encode_json("a\udc80", "x")) == "a\udc80"  # kept as an escape
    with pytest.raises(TypeError, match="payload of 'send' is not JSON-serialisable"):
        encode_json({"when": object()}, "payload of 'send'")
    with pytest.raises(ValueError, match="result is not valid JSON"):
        encode_json(float("nan"), "result")


def test_encode_json_refuses_what_nests_too_deep():
    ok = json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert encode_json(ok, "x")
    deeper = [ok]
    with pytest.raises(ValueError, match=f"nests deeper than {MAX_DEPTH} levels"):
        encode_json(deeper, "x")
    very = []
    for _ in range(100_000):
        very = [very]
    with pytest.raises(ValueError, match="nests deeper"):
        encode_json(very, "x")


def running(attempts, cancel=None):
    return SimpleNamespace(attempts=attempts, cancel_requested_at=cancel)


@pytest.mark.parametrize(
    "attempts, limit, counts, want",
    [
        (1, 3, False, ("pending", 0)),  # attempt given back
        (1, 3, True, ("pending", 1)),
        (3, 3, True, ("failed", 3)),  # the last attempt counted
        (3, 3, False, ("pending", 2)),
        (0, 3, False, ("pending", 0)),
    ],
)
def test_release_outcome(attempts, limit, counts, want):
    assert release_outcome(running(attempts), limit, counts) == want


def test_a_released_job_whose_cancel_was_asked_is_cancelled():
    assert release_outcome(running(3, cancel="t"), 3, True) == ("cancelled", 3)


def test_history_rows_and_recognising_a_committed_outcome():
    done = Finish("completed", "a", 2, '{"r":1}', ended=10.0)
    failed = Finish("failed", "b", 1, "boom", ended=11.0)
    anon = Finish("failed", "c", 1, "boom")
    assert history_row(done, "o", done.text) == ("a", 2, "completed", "o", iso(10.0), None)
    assert history_row(failed, "o", "boom") == ("b", 1, "failed", "o", iso(11.0), "boom")
    assert history_row(anon, "o", "boom") is None
    asked = []

    def history(ids):
        asked.append(ids)
        return [history_row(failed, "o", "boom"), ("a", 1, "completed", "o", iso(10.0), None)]

    got = recognised([done, failed, anon], [False, False, False], "o", history)
    assert got == [False, True, False] and asked == [["a", "b"]]
    assert recognised([done], [True], "o", lambda ids: pytest.fail("read")) == [True]
    assert recognised([failed], [False], "other", history) == [False]

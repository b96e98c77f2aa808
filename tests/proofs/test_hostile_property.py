"""Property test: generated payloads, results, error texts and RetryAfter values
(lone surrogates, odd Unicode, deep nesting, huge numbers, NaN, oversized results, bad type
names) go through ONE real supervisor and its real workers. Every job must end in the state
docs/limits.md documents, and no worker may crash. Examples share the supervisor: each
enqueues a few jobs and waits until all of them have ended."""

from __future__ import annotations

import json
import math
import signal
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared import JobQueue, RetryAfter
from shared.model.bounds import MAX_DEPTH, MAX_TIME, MAX_TIME_TEXT, safe_text
from shared.runtime.clock import parse_iso
from shared.model.job import encode_json
from tests.proc import Running, job_row, wait_until, worker_rows, write_config

MAX_RESULT = 20_000

ODD = [
    "\udc80",
    "\ud800",
    "\udfff",
    "\x00",
    "\x1f",
    "\u2028",
    "\ufeff",
    "😀",
    "é",
    '"',
    "\\",
    "[",
    "{",
    "]",
]
texts = st.text(st.one_of(st.characters(), st.sampled_from(ODD)), max_size=12)
numbers = st.one_of(
    st.integers(-(1 << 70), 1 << 70),
    st.sampled_from([10**400, -(10**400), 1e308, -0.0]),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(texts, kids, max_size=3),
    max_leaves=8,
)
junk = st.one_of(json_values, st.sampled_from([float("nan"), float("inf"), [float("-inf")]]))
nests = st.sampled_from(
    [0, 0, 1, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 300, 2000]
)
delays = st.one_of(
    st.sampled_from(
        [
            0,
            0.25,
            3600,
            2.5e11,
            2.53e11,
            3.2e12,
            1e300,
            float("inf"),
            float("nan"),
            -1,
            -0.0,
            10**400,
            RetryAfter.MAX_DELAY,
            "nan",
            "inf",
            "-inf",
            "1e300",
        ]
    ),
    st.floats(min_value=0, max_value=1e13),
    st.floats(),
)
types = st.sampled_from(["hostile:do"] * 8 + ["a\x00b", "x" * 201, "no:such:😀", "t\udc80"])


@st.composite
def orders(draw):
    act = draw(st.sampled_from(["return", "return", "raise", "retry_after", "log"]))
    payload = {"act": act, "surrogate": draw(st.booleans())}
    if act == "retry_after":
        payload["value"] = draw(delays)
        payload["message"] = draw(texts)
    elif act == "return" and draw(st.integers(0, 4)) == 0:
        payload["size"] = draw(st.sampled_from([0, 100, MAX_RESULT - 2, MAX_RESULT - 1, 50_000]))
    else:
        payload["value"] = draw(json_values if act == "return" else texts)
        payload["nest"] = draw(nests) if act == "return" else 0
    if draw(st.integers(0, 3)) == 0:
        payload["junk"] = wrap(draw(junk), draw(nests))
    return draw(types), payload


def wrap(value, n):
    for _ in range(n):
        value = [value]
    return value


def depth(value) -> int:
    """Containers on the deepest path (iterative: values may be 5,000 deep)."""
    best, stack = 0, [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            best = max(best, d + 1)
            stack += [(x, d + 1) for x in (v.values() if isinstance(v, dict) else v)]
    return best


def finite(value) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return False
        if isinstance(v, (list, dict)):
            stack += list(v.values() if isinstance(v, dict) else v)
    return True


def bad_type(jtype: str) -> bool:
    return jtype in ("a\x00b", "x" * 201, "t\udc80")


def ended(row) -> bool:
    """The documented end states: terminal, or pending again after RetryAfter(s > 2 s)."""
    if row["status"] in ("completed", "failed", "cancelled"):
        return True
    return (
        row["status"] == "pending"
        and row["attempts"] == 1
        and row["error"] is not None
        and parse_iso(row["run_at"]) - parse_iso(row["updated_at"]) > 2
    )


@pytest.fixture(scope="module")
def hostile_sup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    cfg = write_config(
        folder,
        handlers=["hostilejobs"],
        log_format="json",
        max_result_bytes=MAX_RESULT,
        supervisor={"workers": 2},
    )
    sup = Running(cfg)
    try:
        wait_until(lambda: len(worker_rows(cfg)) == 2, timeout=30, what="2 workers registered")
        pids = sorted(w["pid"] for w in worker_rows(cfg))
        with JobQueue(str(cfg.parent / "q.db")) as q:
            yield cfg, sup, q, pids
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        sup.close()


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(batch=st.lists(orders(), min_size=1, max_size=5))
def test_hostile_handler_output_ends_every_job_in_a_documented_state(hostile_sup, batch):
    cfg, sup, q, pids = hostile_sup
    jobs = []
    for jtype, payload in batch:
        retry = payload["act"] == "retry_after"
        try:
            job_id = q.enqueue(jtype, payload, max_attempts=2 if retry else None)
        except (TypeError, ValueError) as exc:
            msg = str(exc)
            assert bad_type(jtype) or depth(payload) > MAX_DEPTH or not finite(payload), msg
            if bad_type(jtype):
                assert "job type" in msg
            elif not finite(payload):
                assert "not valid JSON" in msg or "nests deeper" in msg
            else:
                assert f"nests deeper than {MAX_DEPTH} levels" in msg
            continue
        assert not bad_type(jtype) and depth(payload) <= MAX_DEPTH and finite(payload)
        jobs.append((job_id, jtype, payload, time.time()))
    wait_until(
        lambda: all(ended(job_row(cfg, j)) for j, *_ in jobs), timeout=30, what="every job to end"
    )
    for job_id, jtype, payload, t in jobs:
        check(q.get(job_id), jtype, payload, t)
    assert sorted(w["pid"] for w in worker_rows(cfg)) == pids, "a worker was replaced"
    assert not [
        line
        for line in sup.output().splitlines()
        if '"worker.exited"' in line or '"supervisor.crashed"' in line
    ]


def check(job, jtype, payload, enqueued_at):
    assert job.payload == payload  # kept exactly
    if jtype != "hostile:do":
        assert job.status == "failed" and "no handler" in job.error
        return
    act, tail = payload["act"], ("\udc80" if payload.get("surrogate") else "")
    if act == "raise":
        assert job.status == "failed" and job.attempts == 1
        # the traceback text is rstripped (whitespace such as \x1f and \u2028 included)
        assert (
            "ValueError" in job.error
            and safe_text((str(payload["value"]) + tail).rstrip()) in job.error
        )
    elif act == "log":
        assert job.status == "completed" and job.result == str(payload["value"]) + tail
    elif act == "return":
        if "size" in payload:
            expected = "r" * payload["size"]
        else:
            expected = (
                str(payload["value"]) + tail if payload.get("surrogate") else payload["value"]
            )
            expected = wrap(expected, payload.get("nest", 0))
        if depth(expected) > MAX_DEPTH:
            assert job.status == "failed" and f"nests deeper than {MAX_DEPTH} levels" in job.error
        elif len(encode_json(expected, "r").encode()) > MAX_RESULT:
            assert job.status == "failed" and f"exceeds max_result_bytes={MAX_RESULT}" in job.error
        else:
            assert job.status == "completed", job.error
            assert job.result == expected or json.dumps(job.result) == json.dumps(expected)
    else:
        check_retry_after(job, payload["value"])


def check_retry_after(job, s):
    s = float(s) if isinstance(s, str) else s
    valid = (
        isinstance(s, (int, float))
        and 0 <= s <= RetryAfter.MAX_DELAY
        and time.time() + s <= MAX_TIME
    )
    if not valid:  # an ordinary failure naming the limit: retried (backoff 0), then failed
        assert job.status == "failed" and job.attempts == 2 and MAX_TIME_TEXT in job.error, (
            job.error
        )
    elif job.status == "pending":  # due again in s seconds
        assert job.attempts == 1 and "RetryAfter" in job.error
        assert s - 5 <= parse_iso(job.run_at) - parse_iso(job.updated_at) <= s + 0.002
    else:  # a short delay: run again, attempts used up
        assert job.status == "failed" and job.attempts == 2 and "RetryAfter" in job.error

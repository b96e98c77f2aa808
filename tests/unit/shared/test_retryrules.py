"""shared.model.retryrules: what a task's code retries (no_retry_for first, then retry_for),
and the back-off a task, its type's config and a job's own rule choose between
(shared.execution.policy), judged by the runner without importing anything."""

from __future__ import annotations

import json
import random

import pytest

from shared.execution.handlers import HandlerSpec, PermanentError, Registry
from shared.execution.policy import JobPolicy
from shared.execution.runner import JobContext, execute
from shared.model.job import Job
from shared.model.retryrules import RetryRule, class_name, make_rule, rule_of_payload
from shared.settings.config import from_dict


class Flaky(ConnectionError):
    pass


def test_retry_for_retries_what_it_names_and_its_subclasses_only():
    rule = make_rule("task 't'", retry_for=(ConnectionError, TimeoutError))
    assert rule.refuses(ConnectionError()) is None
    assert rule.refuses(Flaky()) is None  # a subclass is covered by its base
    why = rule.refuses(ValueError("bad"))
    assert "builtins.ValueError is not covered by retry_for" in why
    assert "builtins.ConnectionError" in why


def test_no_retry_for_wins_over_retry_for():
    rule = make_rule("task 't'", retry_for=ConnectionError, no_retry_for=(Flaky,))
    assert rule.refuses(ConnectionError()) is None
    assert f"covered by no_retry_for ({class_name(Flaky)})" in rule.refuses(Flaky())
    assert make_rule("t", no_retry_for=KeyError).refuses(ValueError()) is None


def test_an_empty_retry_for_retries_nothing():
    assert make_rule("t", retry_for=()).refuses(ValueError()) is not None


@pytest.mark.parametrize(
    "options, error",
    [
        ({"retry_for": ValueError("x")}, "retry_for takes exception classes"),
        ({"no_retry_for": (KeyError, int)}, "no_retry_for takes exception classes"),
        ({"backoff": -1}, "backoff must be a number of seconds"),
        ({"max_delay": float("nan")}, "max_delay must be a number of seconds"),
        ({"jitter": 2}, "jitter must be a fraction from 0 to 1"),
    ],
)
def test_bad_options_are_refused_naming_the_task_and_the_option(options, error):
    with pytest.raises((TypeError, ValueError), match=error) as info:
        make_rule("task 'billing.charge'", **options)
    assert "task 'billing.charge'" in str(info.value)


def test_no_option_is_no_rule_and_jitter_takes_a_bool():
    assert make_rule("t") is None
    assert make_rule("t", jitter=True).jitter == 0.25 and make_rule("t", jitter=False).jitter == 0


def test_a_rule_round_trips_through_a_payload_and_overrides_field_by_field():
    rule = make_rule("t", no_retry_for=KeyError, backoff=3)
    payload = {"args": [], "kwargs": {}, "retry": rule.to_json()}
    assert payload["retry"] == {"no_retry_for": ["builtins.KeyError"], "backoff": 3.0}
    assert rule_of_payload(payload) == rule
    task = RetryRule(retry_for=("builtins.OSError",), backoff=1.0, max_delay=9.0)
    merged = rule.over(task)
    assert merged.retry_for == ("builtins.OSError",) and merged.no_retry_for == (
        "builtins.KeyError",
    )
    assert (merged.backoff, merged.max_delay) == (3.0, 9.0)
    assert rule_of_payload({"retry": "junk"}) is None and rule_of_payload([1]) is None


def _run(spec: HandlerSpec, payload=None):
    text = json.dumps(payload or {"args": [], "kwargs": {}})
    row = dict(id="j1", type=spec.type, status="running", payload=text, result=None, error=None)
    times = dict(run_at="x", started_at=None, completed_at=None, created_at="x", updated_at="x")
    job = Job.from_row(dict(row, attempts=1, max_attempts=3, priority=0, **times))
    ctx = JobContext("j1", spec.type, 1, 3)
    return execute(Registry([spec]), job, ctx)


def test_the_runner_fails_for_good_what_the_rule_refuses():
    def boom(payload, job):
        raise ValueError("no such customer")

    task = HandlerSpec("t", boom, retry=make_rule("t", retry_for=ConnectionError), params=())
    out = _run(task)
    assert out.kind == "failed" and "not covered by retry_for" in out.error
    assert "no such customer" in out.error
    # the job's own rule (from .using()) replaces the task's retry_for
    assert _run(task, {"args": [], "retry": {"retry_for": ["builtins.ValueError"]}}).kind == "error"
    # a plain handler's payload is the user's: a "retry" in it is no rule
    plain = HandlerSpec("t", boom, retry=None, params=None)
    assert _run(plain, {"retry": {"retry_for": []}}).kind == "error"


def test_permanent_error_still_fails_whatever_retry_for_says():
    def perm(payload, job):
        raise PermanentError("stop")

    spec = HandlerSpec("t", perm, retry=make_rule("t", retry_for=PermanentError), params=())
    assert _run(spec).kind == "failed"


def _policy(types, spec):
    config = from_dict({"retry": {"backoff_base": 1, "backoff_max": 1000}, "types": types})
    return JobPolicy(config, Registry([spec] if spec else []), random.Random(0))


def test_back_off_precedence_job_then_config_type_then_task_then_retry():
    fn = lambda p, j: None  # noqa: E731
    code = HandlerSpec("t", fn, retry=make_rule("t", backoff=10, jitter=0, max_delay=50), params=())
    assert _policy({}, code).backoff(1, "t") == 20  # the task's: 10 * 2
    assert _policy({}, code).backoff(3, "t") == 50  # capped by its max_delay
    typed = _policy({"t": {"backoff_base": 2, "jitter": 0}}, code)
    assert typed.backoff(1, "t") == 4  # [types.t] wins over the task's code
    own = {"args": [], "retry": {"backoff": 100, "max_delay": 150}}
    assert typed.backoff(1, "t", own) == 150  # the job's own (.using()) wins over both
    assert _policy({}, None).backoff(1, "t") <= 2  # neither: [retry]

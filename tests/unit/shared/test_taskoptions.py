"""shared.producer.taskoptions: a task's options in code. Its limit key (``.using()`` >
``[types.X] key`` > ``@task(limit_key=)``), found by parameter name however the caller passed
it; its schedule, checked when the task is declared; the retry rule ``.using()`` stores in the
job's payload; and ``jobq config check``'s refusal of a key naming no parameter."""

from __future__ import annotations


import pytest

from shared.execution.handlers import ATTR, Registry
from shared.producer.api import JobQueue
from shared.producer.tasks import task
from shared.settings import schedule
from shared.settings.config import from_dict
from supervisor.cli.configcmd import key_path_errors


def _charge(customer_id: str, amount: int = 1, order: dict | None = None) -> int:
    return amount


def queue(tmp_path, types=None):
    cfg = from_dict({"database": str(tmp_path / "q.db"), "types": types or {}})
    return JobQueue(config=cfg)


def limit_key(q, t, *args, **kwargs):
    return q.get(t.using(queue=q).enqueue(*args, **kwargs).id).limit_key


def test_a_config_key_names_a_parameter_found_by_position_or_keyword(tmp_path):
    t = task(name="billing.charge")(_charge)
    for key in ("customer_id", "payload.kwargs.customer_id"):
        q = queue(tmp_path, {"billing.charge": {"key": key, "concurrency_per_key": 1}})
        assert limit_key(q, t, "acme", 5) == "acme"
        assert limit_key(q, t, customer_id="acme", amount=5) == "acme"
        q.close()


def test_a_config_key_walks_into_an_argument_and_a_default_counts(tmp_path):
    t = task(name="billing.charge")(_charge)
    q = queue(tmp_path, {"billing.charge": {"key": "order.shop"}})
    assert limit_key(q, t, "a", order={"shop": 7}) == "7"
    with pytest.raises(ValueError, match="argument 'order' has no shop"):
        t.using(queue=q).enqueue("a", order={"x": 1})
    q2 = queue(tmp_path, {"billing.charge": {"key": "amount"}})
    assert limit_key(q2, t, "a") == "1"  # the parameter's default


def test_a_config_key_naming_no_parameter_raises_naming_the_parameters(tmp_path):
    t = task(name="billing.charge")(_charge)
    q = queue(tmp_path, {"billing.charge": {"key": "customer"}})
    with pytest.raises(ValueError, match="names no parameter.*customer_id, amount, order"):
        t.using(queue=q).enqueue("acme")


def test_limit_key_in_code_a_value_or_a_function_and_who_wins(tmp_path):
    by_fn = task(name="billing.charge", limit_key=lambda customer_id, **_: customer_id)(_charge)
    q = queue(tmp_path)
    assert limit_key(q, by_fn, "acme", 2) == "acme"
    assert limit_key(q, by_fn, amount=2, customer_id="zeta") == "zeta"
    assert limit_key(q, by_fn.using(limit_key="fixed"), "acme") == "fixed"  # .using() wins
    none = task(name="billing.none", limit_key=lambda *a, **k: None)(_charge)
    assert limit_key(q, none, "acme") is None
    const = task(name="billing.const", limit_key=42)(_charge)
    assert limit_key(q, const, "acme") == "42"
    q2 = queue(tmp_path, {"billing.charge": {"key": "amount"}})
    assert limit_key(q2, by_fn, "acme", 3) == "3"  # the config's key wins over the task's
    assert limit_key(q2, by_fn.using(limit_key="mine"), "acme", 3) == "mine"


def test_a_limit_key_function_that_does_not_fit_is_named(tmp_path):
    t = task(name="billing.bad", limit_key=lambda: "x")(_charge)
    with pytest.raises(TypeError, match="limit_key function .* could not be called"):
        t.using(queue=queue(tmp_path)).enqueue("acme")
    with pytest.raises(TypeError, match="limit_key must be a string, a number or a function"):
        task(name="billing.worse", limit_key=[1])(_charge)


def test_using_stores_its_retry_rule_in_the_payload_and_chains(tmp_path):
    t = task(name="billing.charge", retry_for=ConnectionError)(_charge)
    q = queue(tmp_path)
    plain = q.get(t.using(queue=q).enqueue("a").id).payload
    assert "retry" not in plain  # the task's own rule rides on its handler spec
    t2 = t.using(queue=q, backoff=5).using(no_retry_for=KeyError)
    payload = q.get(t2.enqueue("a").id).payload
    assert payload["retry"] == {"no_retry_for": ["builtins.KeyError"], "backoff": 5.0}
    assert t2.using().options["retry"].backoff == 5.0


def test_the_spec_carries_the_rule_the_schedule_and_the_parameters():
    t = task(
        name="reports.nightly",
        retry_for=(ConnectionError,),
        backoff=2,
        schedule="30 2 * * *",
        tz="Europe/Paris",
        schedule_args={"customer_id": "all"},
    )(_charge)
    spec = getattr(t, ATTR)
    assert spec.retry.retry_for == ("builtins.ConnectionError",) and spec.retry.backoff == 2
    assert spec.params == ("customer_id", "amount", "order")
    s = spec.schedule
    assert (s.name, s.type, s.cron, s.timezone) == (
        "reports.nightly",
        "reports.nightly",
        "30 2 * * *",
        "Europe/Paris",
    )
    assert s.payload == {"args": [], "kwargs": {"customer_id": "all"}}


@pytest.mark.parametrize(
    "options, error",
    [
        ({"schedule": "*/5 * * *"}, "schedule='\\*/5 \\* \\* \\*'"),
        ({"schedule": "* * * * *", "tz": "Mars/Olympus"}, "tz='Mars/Olympus'"),
        ({"schedule": "* * * * *"}, "missing a required argument: 'customer_id'"),
        ({"schedule": "* * * * *", "schedule_args": ("a", "b")}, "schedule_args=\\('a', 'b'\\)"),
        ({"tz": "UTC"}, "need schedule="),
    ],
)
def test_a_schedule_that_cannot_run_is_refused_when_declared(options, error):
    with pytest.raises((TypeError, ValueError), match=error) as info:
        task(name="reports.nightly", **options)(_charge)
    assert "reports.nightly" in str(info.value)


def test_the_config_file_wins_where_both_name_a_schedule():
    t = task(name="reports.nightly", schedule="0 3 * * *", schedule_args=("x",))(_charge)
    other = task(name="reports.other", schedule="0 4 * * *", schedule_args=("y",))(_charge)
    registry = Registry([getattr(t, ATTR), getattr(other, ATTR)])
    entry = {"name": "reports.nightly", "type": "reports.nightly", "cron": "0 5 * * *"}
    cfg = from_dict({"schedule": [entry]})
    got = schedule.entries(cfg, registry)
    assert [(s.name, s.cron) for s in got] == [
        ("reports.nightly", "0 5 * * *"),
        ("reports.other", "0 4 * * *"),
    ]
    runs = schedule.next_runs(cfg, 0.0, None, registry)
    assert [r.source for r in runs] == ["config", "code"]
    assert schedule.entries(cfg) == list(cfg.schedules)


def test_config_check_refuses_a_task_key_naming_no_parameter():
    t = task(name="billing.charge")(_charge)
    registry = Registry([getattr(t, ATTR)])
    bad = from_dict({"types": {"billing.charge": {"key": "payload.customer_id"}}})
    (why,) = key_path_errors(bad, registry)
    assert "names no parameter of task 'billing.charge'" in why and "customer_id" in why
    ok = from_dict({"types": {"billing.charge": {"key": "customer_id"}, "x": {"key": "a"}}})
    assert key_path_errors(ok, registry) == []


def test_a_flow_applies_each_tasks_options(tmp_path):
    from shared.producer.canvas import chain

    t = task(name="billing.charge", limit_key=lambda customer_id, **_: customer_id)(_charge)
    q = queue(tmp_path)
    run = chain(t.s("acme"), t.using(backoff=1).s("zeta")).enqueue(q)
    first, second = (q.get(h.id) for h in run.handles)
    assert (first.limit_key, second.limit_key) == ("acme", "zeta")
    assert second.payload["retry"] == {"backoff": 1.0}

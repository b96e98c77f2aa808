"""A task's arguments and result carried by their annotations, on both engines, in the calling
process (drain, immediate mode): datetime, date, time, timedelta, UUID, Decimal, Enum, Path,
dataclasses, TypedDict, pydantic models, a codec of the application's own, and containers of
them. The stored payload is plain JSON; the function gets the annotated types; ``.wait()``
returns the annotated type; a value that does not fit is refused at enqueue, and a stored one
that does not decode fails the job for good.

The tasks are tests/fixtures/richjobs.py, imported as ``richjobs``."""

from __future__ import annotations

import datetime as dt
import decimal
import pathlib
import sys
import uuid

import pytest

import shared.producer.tasks
from jobq import JobFailed, codec
from shared.settings.config import Config
from tests.taskqueues import forget_default_queue, queue_maker
from tests.proc import FIXTURES

if FIXTURES not in sys.path:
    sys.path.insert(0, FIXTURES)
import richjobs  # noqa: E402

UTC = dt.timezone.utc
ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
PLACED = dt.datetime(2026, 3, 1, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))


@pytest.fixture
def queue_of(engine):
    """``queue_of(immediate=False, config=NO_BACKOFF)``: a queue serving richjobs; closed after."""
    yield from queue_maker(engine, "richjobs")


@pytest.fixture(autouse=True)
def no_default_queue(monkeypatch):
    forget_default_queue(monkeypatch)


def order(**changes) -> richjobs.Order:
    fields = dict(
        id=ID,
        total=decimal.Decimal("10.50"),
        placed=PLACED,
        tier=richjobs.Tier.GOLD,
        ship_to=richjobs.Address("Lyon", "69001"),
        lines=[decimal.Decimal("4.25"), decimal.Decimal("6.25")],
    )
    return richjobs.Order(**{**fields, **changes})


def test_the_payload_is_plain_json_and_the_function_gets_the_annotated_types(queue_of):
    q = queue_of()
    handle = richjobs.describe.using(queue=q).enqueue(
        order(),
        dt.date(2026, 3, 2),
        dt.timedelta(minutes=90),
        dt.time(8, 15),
        pathlib.Path("/srv/out"),
        [ID],
        {"eu": decimal.Decimal("0.2")},
    )
    assert q.get(handle.id).payload == {
        "args": [
            {
                "id": str(ID),
                "total": "10.50",
                "placed": "2026-03-01T09:30:00+02:00",
                "tier": "gold",
                "ship_to": {"city": "Lyon", "postcode": "69001"},
                "lines": ["4.25", "6.25"],
            },
            "2026-03-02",
            5400,
            "08:15:00",
            "/srv/out",
            [str(ID)],
            {"eu": "0.2"},
        ],
        "kwargs": {},
    }
    assert q.drain() == {"completed": 1, "retried": 0, "failed": 0}
    assert handle.wait(timeout=5) == {
        "order": "Order",
        "due": "date",
        "window": "timedelta",
        "at": "time",
        "folder": "PosixPath",
        "note": "NoneType",
        "ids": "UUID",
        "rates": "Decimal",
        "order.total": "Decimal",
        "order.ship_to": "Address",
    }


def test_wait_and_get_return_the_annotated_result(queue_of):
    q = queue_of(immediate=True)
    handle = richjobs.echo_order.using(queue=q).enqueue(order(ship_to=None))
    back = handle.wait(timeout=5)
    assert back == order(ship_to=None, total=decimal.Decimal("11.50"))
    assert handle.get().result == back
    assert q.get(handle.id).result["total"] == "11.50"  # stored as plain JSON
    flow = q.wait_many([handle], timeout=5)
    assert flow == [back]


def test_typed_dicts_pydantic_models_and_the_applications_own_codec(queue_of):
    q = queue_of(immediate=True)
    day = dt.date(2026, 1, 31)
    totals = [
        {"net": decimal.Decimal("1.1"), "day": day},
        {"net": decimal.Decimal("2.2"), "day": day},
    ]
    assert richjobs.sum_totals.using(queue=q).enqueue(totals).wait(5) == {
        "net": decimal.Decimal("3.3"),
        "day": day,
    }
    customer = richjobs.Customer(id=ID, name="Ada", since=day)
    handle = richjobs.welcome.using(queue=q).enqueue(customer, richjobs.Money(150, "EUR"))
    assert q.get(handle.id).payload["args"] == [
        {"id": str(ID), "name": "Ada", "since": "2026-01-31"},
        "150 EUR",
    ]
    assert handle.wait(5) == (customer, richjobs.Money(300, "EUR"))


def test_an_async_task_round_trips_an_aware_datetime(queue_of):
    q = queue_of()
    handle = richjobs.next_day.using(queue=q).enqueue(PLACED)
    q.drain()
    assert handle.wait(5) == PLACED + dt.timedelta(days=1)
    assert handle.wait(5).utcoffset() == dt.timedelta(hours=2)


@pytest.mark.parametrize(
    "task, args, error, named",
    [
        (richjobs.on_day, ("2026-01-01",), TypeError, "argument 'day' is a str value"),
        (richjobs.on_day, (dt.datetime(2026, 1, 1, tzinfo=UTC),), ValueError, "pass .date()"),
        (richjobs.on_day, (dt.date(2026, 1, 1), "gold"), TypeError, "annotation Tier"),
        (richjobs.next_day, (dt.datetime(2026, 1, 1),), ValueError, "naive datetime"),
        (richjobs.echo_order, (order(total=1.5),), TypeError, "'order'.total is a float"),
        (richjobs.echo_order, (order(lines=[1.0]),), TypeError, "'order'.lines[0] is a float"),
        (richjobs.welcome, ({"id": 1}, richjobs.Money(1, "X")), TypeError, "'customer' is a dict"),
    ],
)
def test_a_value_that_does_not_fit_is_refused_at_enqueue_naming_the_task_and_argument(
    queue_of, task, args, error, named
):
    q = queue_of()
    with pytest.raises(error) as info:
        task.using(queue=q).enqueue(*args)
    assert named in str(info.value) and repr(task.name) in str(info.value), info.value
    assert q.drain() == {"completed": 0, "retried": 0, "failed": 0}  # nothing was written


def test_a_stored_payload_that_does_not_decode_fails_for_good_naming_the_argument(queue_of):
    q = queue_of(config=Config())  # with back-off: a retry would not be due at once
    job_id = q.enqueue("richjobs.on_day", {"args": ["31/01/2026"], "kwargs": {"tier": "gold"}})
    assert q.drain() == {"completed": 0, "retried": 0, "failed": 1}
    job = q.get(job_id)
    assert job.status == "failed" and job.attempts == 1  # max_attempts=3: not retried
    assert "argument 'day' cannot be read as date from '31/01/2026'" in job.error
    assert q.get(q.enqueue("richjobs.on_day", {"args": ["2026-01-31", "gold"]})).status == "pending"
    assert q.drain()["completed"] == 1


def test_immediate_mode_wait_reports_the_decode_error_not_a_timeout(queue_of):
    q = queue_of(immediate=True, config=Config())
    handle = q.handle(q.enqueue("richjobs.on_day", {"args": [20260131]}))
    with pytest.raises(JobFailed) as info:
        handle.wait(timeout=5)
    assert "argument 'day'" in info.value.traceback


def test_immediate_mode_wait_reports_an_error_whose_retry_is_not_due(queue_of):
    q = queue_of(immediate=True, config=Config())  # back-off: the retry is later
    handle = richjobs.on_day.using(queue=q).enqueue(dt.date(2026, 1, 1), richjobs.Tier.GOLD)
    assert handle.wait(timeout=5) == "2026-01-01 gold"
    failing = richjobs.flaky.using(queue=q).enqueue(dt.date(2026, 1, 1))
    with pytest.raises(JobFailed, match="waits for a retry") as info:
        failing.wait(timeout=30)
    assert "ValueError: no rates for 2026-01-01" in info.value.traceback
    assert failing.status() == "pending"  # left as it is: a drain or a worker retries it


class Late:
    """A class with no codec until the test registers one."""


@shared.producer.tasks.task(name="rich.late")
def late(x: Late) -> None: ...


def test_a_codec_registered_later_is_used_from_then_on():
    with pytest.raises(TypeError, match="register one with jobq.codec"):
        late.binder.payload((Late(),), {})
    codec(Late, encode=lambda v: "late", decode=lambda s: Late())
    assert late.binder.payload((Late(),), {}) == {"args": ["late"], "kwargs": {}}

"""The per-rich-argument part of ``python -m bench.argcodecs``: tasks with three plain arguments
and one rich one of each kind, against the plain task, on this tree's codecs (in this process).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import time
import uuid
from decimal import Decimal
from typing import Any, Callable

from jobq import task


class Tier(enum.Enum):
    GOLD = "gold"


@dataclasses.dataclass
class Line:
    sku: str
    qty: int
    price: Decimal


@task(name="bench.rich.none")
def none(a: int, b: str, c: float) -> int:
    return a


@task(name="bench.rich.uuid")
def with_uuid(a: int, b: str, c: float, x: uuid.UUID) -> int:
    return a


@task(name="bench.rich.datetime")
def with_datetime(a: int, b: str, c: float, x: dt.datetime) -> int:
    return a


@task(name="bench.rich.date")
def with_date(a: int, b: str, c: float, x: dt.date) -> int:
    return a


@task(name="bench.rich.decimal")
def with_decimal(a: int, b: str, c: float, x: Decimal) -> int:
    return a


@task(name="bench.rich.enum")
def with_enum(a: int, b: str, c: float, x: Tier) -> int:
    return a


@task(name="bench.rich.dataclass")
def with_dataclass(a: int, b: str, c: float, x: Line) -> int:
    return a


@task(name="bench.rich.uuids")
def with_uuids(a: int, b: str, c: float, x: list[uuid.UUID]) -> int:
    return a


def _cases() -> dict[str, tuple[Any, Any]]:
    cases: dict[str, tuple[Any, Any]] = {
        "UUID": (with_uuid, uuid.uuid4()),
        "datetime (aware)": (with_datetime, dt.datetime.now(dt.timezone.utc)),
        "date": (with_date, dt.date(2026, 1, 2)),
        "Decimal": (with_decimal, Decimal("12.34")),
        "Enum": (with_enum, Tier.GOLD),
        "dataclass (3 fields)": (with_dataclass, Line("sku-1", 2, Decimal("9.99"))),
        "list[UUID] of 10": (with_uuids, [uuid.uuid4() for _ in range(10)]),
    }
    model = _pydantic_task()
    if model is not None:
        cases["pydantic model (3 fields)"] = model
    return cases


def _pydantic_task() -> tuple[Any, Any] | None:
    try:
        import pydantic
    except ImportError:
        return None

    class Item(pydantic.BaseModel):
        sku: str
        qty: int
        price: Decimal

    globals()["Item"] = Item  # the task's annotation is resolved in this module

    @task(name="bench.rich.pydantic")
    def with_model(a: int, b: str, c: float, x: Item) -> int:
        return a

    return with_model, Item(sku="sku-1", qty=2, price=Decimal("9.99"))


class _Ctx:
    id, attempt, parent_results = "j", 1, {}


def both_sides(t: Any, args: tuple[Any, ...], n: int) -> float:
    """Microseconds per call of the enqueue side and the worker side of task ``t``."""
    payload = t.binder.payload(args, {})
    run: Callable[[Any, Any], Any] = getattr(t, "__jobq_handler__").fn
    ctx = _Ctx()
    t0 = time.perf_counter()
    for _ in range(n):
        t.binder.payload(args, {})
    for _ in range(n):
        run(payload, ctx)
    return (time.perf_counter() - t0) / n * 1e6


def rich_figures(n: int, rounds: int) -> dict[str, float]:
    """Extra microseconds per call of each kind of rich argument over the plain task (the best
    of ``rounds``)."""
    plain = (7, "invoice", 2.5)
    out: dict[str, float] = {}
    for name, (t, value) in _cases().items():
        extra = min(
            both_sides(t, (*plain, value), n) - both_sides(none, plain, n) for _ in range(rounds)
        )
        out[name] = round(extra, 2)
    return out

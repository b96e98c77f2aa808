"""Which codec an annotation gets (shared.model.codecbook): the everyday types' JSON forms,
the user's own codecs (nearest base first, registered again: the last), pydantic only when
the application imported it."""

from __future__ import annotations

import datetime as dt
import enum
import pathlib
import subprocess
import sys
import uuid
from decimal import Decimal
from typing import Any, Literal, NewType, TypedDict

import pytest

from shared.model.codecbook import BOOK, codec, codec_of
from shared.model.codecs import Passthrough

TZ = dt.timezone(dt.timedelta(hours=-5))


class Size(enum.IntEnum):
    S = 1
    L = 3


@pytest.mark.parametrize(
    "tp, value, data",
    [
        (
            dt.datetime,
            dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=TZ),
            "2026-01-02T03:04:05.000006-05:00",
        ),
        (dt.date, dt.date(2026, 1, 2), "2026-01-02"),
        (dt.time, dt.time(3, 4, 5), "03:04:05"),
        (dt.timedelta, dt.timedelta(days=1, microseconds=5), 86400.000005),
        (dt.timedelta, dt.timedelta(minutes=2), 120),
        (uuid.UUID, uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (Decimal, Decimal("0.10"), "0.10"),
        (Size, Size.L, 3),
        (pathlib.Path, pathlib.Path("/a/b"), "/a/b"),
        (NewType("OrderId", uuid.UUID), uuid.UUID(int=2), "00000000-0000-0000-0000-000000000002"),
        (Literal["x", "y"], "y", "y"),
    ],
)
def test_everyday_types_are_readable_json_and_come_back_equal(tp, value, data):
    c = codec_of(tp)
    assert c.encode(value, "a") == data
    back = c.decode(data, "a")
    assert back == value and type(back) is type(value)


def test_what_jobq_does_not_convert_passes_json_through():
    for tp in (Any, object, complex):
        assert isinstance(codec_of(tp), Passthrough)


def test_a_typed_dict_converts_its_known_keys_and_needs_the_required_ones():
    class Row(TypedDict):
        day: dt.date
        n: int

    c = codec_of(Row)
    assert c.decode(c.encode({"day": dt.date(2026, 1, 1), "n": 1}, "a"), "a")["day"] == dt.date(
        2026, 1, 1
    )
    with pytest.raises(ValueError, match="lacks the key 'n'"):
        c.encode({"day": dt.date(2026, 1, 1)}, "a")


class Base:
    def __init__(self, v: int) -> None:
        self.v = v


class Child(Base):
    pass


def test_the_users_codec_serves_subclasses_and_bumps_the_generation():
    before = BOOK.generation
    codec(Base, encode=lambda b: b.v, decode=Base)
    assert BOOK.generation == before + 1
    assert codec_of(Child).encode(Child(4), "a") == 4
    codec(Base, encode=lambda b: str(b.v), decode=lambda s: Base(int(s)))  # the last counts
    assert codec_of(Base).encode(Base(5), "a") == "5"
    with pytest.raises(TypeError, match="must be a class"):
        codec("Base", encode=str, decode=str)  # type: ignore[arg-type]


def test_pydantic_is_never_imported_by_jobq():
    code = (
        "import sys; import jobq; from shared.model.codecbook import codec_of; "
        "import dataclasses, datetime; codec_of(datetime.date); "
        "from jobq import task, current_job, codec; "
        "print('pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_pydantic_model_goes_through_its_own_json_forms():
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: Decimal
        at: dt.date

    c = codec_of(Point)
    data = c.encode(Point(x=Decimal("1.5"), at=dt.date(2026, 1, 1)), "a")
    assert data == {"x": "1.5", "at": "2026-01-01"}
    assert c.decode(data, "a") == Point(x=Decimal("1.5"), at=dt.date(2026, 1, 1))
    with pytest.raises(ValueError, match="cannot be read as"):
        c.decode({"x": "nope"}, "a")

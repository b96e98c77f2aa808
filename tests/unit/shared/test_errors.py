"""shared.model.errors: the store errors callers tell apart (waiting heals, or it does not)."""

from __future__ import annotations

import pytest

from shared.model.errors import (
    StoreBusy,
    StoreError,
    StoreQueryError,
    StoreRefused,
    StoreUnavailable,
)


def test_what_waiting_may_heal_is_apart_from_what_it_does_not():
    assert issubclass(StoreBusy, StoreUnavailable) and issubclass(StoreRefused, StoreUnavailable)
    assert not issubclass(StoreQueryError, StoreUnavailable)
    with pytest.raises(StoreUnavailable):
        raise StoreBusy("locked")
    try:
        raise StoreQueryError("no such table")
    except StoreUnavailable:  # an application's retry on outages must not catch it
        pytest.fail("a query error is not an outage")
    except StoreError:
        pass


def test_the_database_and_cause_travel_with_the_message():
    cause = OSError("disk full")
    e = StoreUnavailable("cannot write /tmp/x.db: disk full", database="/tmp/x.db", cause=cause)
    assert str(e) == "cannot write /tmp/x.db: disk full"
    assert (e.database, e.cause) == ("/tmp/x.db", cause) and isinstance(e, RuntimeError)
    assert (StoreError("x").database, StoreError("x").cause) == ("", None)

"""supervisor.storeref: the supervisor's store, opened on demand and refused for good once the
database is no longer the one opened at boot."""

from __future__ import annotations

import pytest

from shared.model.errors import StoreError
from supervisor import storeref
from supervisor.storeref import StoreRef


class Store:
    closed = 0

    def close(self):
        Store.closed += 1


class Health:
    def __init__(self):
        self.found = None

    def problem(self):
        return self.found


@pytest.fixture
def ref(monkeypatch):
    opened = []
    monkeypatch.setattr(
        storeref, "open_store", lambda config, upkeep: opened.append(upkeep) or Store()
    )
    r = StoreRef()
    r.opened = opened
    return r


def test_opened_once_on_demand_and_again_after_close(ref):
    s = ref.get("cfg")
    assert ref.get("cfg") is s and ref.opened == [True]
    ref.close()
    ref.close()  # twice is harmless
    assert ref.get("cfg") is not s and ref.opened == [True, True]


def test_a_replaced_database_is_refused_for_good(ref):
    health = ref.health = Health()
    ref.get("cfg")
    assert ref.replaced() is None
    before = Store.closed
    health.found = "the database file was replaced"
    assert ref.replaced() == "the database file was replaced"
    assert ref.store is None and Store.closed == before + 1
    assert ref.replaced() is None  # said once
    health.found = None  # even if the check would pass again
    with pytest.raises(StoreError, match="was replaced"):
        ref.get("cfg")


def test_reopening_asks_the_health_check_first(ref):
    health = ref.health = Health()
    health.found = "moved"
    with pytest.raises(StoreError, match="moved"):
        ref.get("cfg")
    assert ref.opened == []


def test_without_a_health_check_nothing_is_replaced(ref):
    assert ref.replaced() is None

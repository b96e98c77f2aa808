"""shared.engines.guard: which of a store's methods an engine's error translation wraps."""

from __future__ import annotations

from shared.engines.guard import guard_public_methods, unguarded


class Base:
    def inherited(self):
        return "inherited"


class Store(Base):
    def claim(self):
        return "claim"

    def _helper(self):
        return "helper"

    def _paced(self):
        return "paced"

    @unguarded
    def purge(self):
        return "purge"

    @staticmethod
    def static():
        return "static"

    @property
    def name(self):
        return "name"


def test_public_methods_and_the_listed_private_steps_are_wrapped():
    wrapped = []

    def guarded(fn):
        wrapped.append(fn.__name__)
        return lambda *a, **k: f"guarded {fn(*a, **k)}"

    cls = guard_public_methods(Store, guarded)
    assert cls is Store
    assert sorted(wrapped) == ["_paced", "claim", "inherited"]
    s = Store()
    assert (s.claim(), s.inherited(), s._paced()) == (
        "guarded claim",
        "guarded inherited",
        "guarded paced",
    )
    assert (s._helper(), s.purge(), Store.static(), s.name) == ("helper", "purge", "static", "name")

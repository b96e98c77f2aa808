"""One id resolver: the functions `jobq retry`/`cancel` and the dashboard's actions
call (``supervisor.views.actions.retry_ids``, ``cancel_ids``, ``purge_ids``) take an exact id or a
unique prefix, as ``show`` does, and say how many jobs share an ambiguous one; on both engines."""

from __future__ import annotations

from shared.runtime.clock import SystemClock
from shared.model.job import NewJob
from supervisor.views import actions as ops

NOW = SystemClock().now()


def add(store, *ids: str) -> None:
    store.enqueue([NewJob(i, "t:x", "null", 0, NOW, None, None) for i in ids], NOW)


def test_actions_resolve_unique_prefixes_and_refuse_ambiguous_ones(engine):
    with engine.open() as store:
        a, b, c = "0a1b2c3d" + "1" * 24, "0a1b2c3d" + "2" * 24, "ffee0011" + "3" * 24
        add(store, a, b, c)
        out = ops.cancel_ids(store, [c[:8], "0a1b2c3d", a, "zzzz", "0a1"], NOW)
        assert out.done == [c, a]
        assert out.skipped == {
            "0a1b2c3d": "2 jobs start with it: give more of the id",
            "zzzz": "no such job",
            "0a1": "no such job",
        }  # under 4 characters: no prefix
        assert ops.retry_ids(store, [a[:12].upper()], NOW).done == [a]  # ids are lower-case hex
        out = ops.retry_ids(store, [b[:10], b], NOW)
        assert out.done == [] and out.skipped == {
            b: "is pending: retry applies to failed or cancelled jobs"
        }
        assert (
            ops.purge_ids(store, [c[:9]]).done == [c] and store.get(c) is None
        )  # cancelled: finished


def test_an_ambiguous_prefix_says_how_many_jobs_share_it(engine):
    with engine.open() as store:
        add(store, *(f"abcd{n:028x}" for n in range(ops.MAX_MATCHES + 5)))
        assert ops.resolve_ids(store, ["abcd"])[1] == {
            "abcd": f"more than {ops.MAX_MATCHES} jobs start with it: give more of the id"
        }
        assert ops.resolve_ids(store, ["abcd" + "0" * 27])[1] == {
            "abcd" + "0" * 27: "16 jobs start with it: give more of the id"
        }

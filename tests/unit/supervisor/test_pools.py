"""supervisor.pools: ``--queues`` over the file's config, and the pools as a log line."""

from __future__ import annotations

from shared.settings.config import from_dict
from supervisor.pools import describe, total_workers, with_queues


def config():
    return from_dict(
        {"supervisor": {"workers": 8}, "queues": {"emails": {"workers": 2}, "bulk": {"weight": 3}}}
    )


def test_describe_names_own_pools_then_the_shared_one():
    assert describe(config()) == "emails=2 *=6"
    assert describe(from_dict({"supervisor": {"workers": 3}})) == "*=3"


def test_with_queues_narrows_and_none_keeps_the_file():
    cfg = config()
    assert with_queues(cfg, None) is cfg
    only = with_queues(cfg, ("emails",))
    assert only.supervisor.queues == ("emails",) and cfg.supervisor.queues == ()
    assert describe(only) == "emails=2" and total_workers(only) == 2
    assert describe(with_queues(cfg, ["bulk"])) == "*=8"  # emails' pool is not served here

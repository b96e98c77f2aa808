"""shared.runtime.fencing: when a worker that cannot renew its lease stops itself."""

from __future__ import annotations

import pytest

from shared.runtime.fencing import check, fence_after, margin


@pytest.mark.parametrize(
    "beat, lease, want",
    [
        (1.0, 30.0, 6.0),  # a fifth of the lease beats two beats
        (5.0, 30.0, 10.0),  # two beats beat a fifth
        (10.0, 30.0, 15.0),  # never more than half the lease
    ],
)
def test_margin(beat, lease, want):
    assert margin(beat, lease) == pytest.approx(want)
    assert fence_after(beat, lease) == pytest.approx(lease - want)


def test_a_quarter_of_the_lease_is_the_longest_beat():
    assert check(7.5, 30.0) is None
    assert check(1.0, 30.0) is None
    why = check(7.6, 30.0)
    assert why is not None and "worker.lease_timeout (30.0)" in why and "15 s" in why

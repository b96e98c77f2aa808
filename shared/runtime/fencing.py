"""Self-fencing: how long a worker may go without renewing its lease before it stops itself.

A lease is judged expired by any host once ``lease_timeout`` seconds have passed since it was
last renewed, on the database's clock. A worker that cannot renew it (the database is down or
unreachable, its host is cut off) must stop running the job before that can happen, or two runs
of one job would overlap. So a worker that holds running jobs exits (``ExitCode.FENCED``) once

    now - last_renewal_sent > lease_timeout - margin        (both on its own monotonic clock)

where ``last_renewal_sent`` is when it *sent* the last statement that renewed its lease and
succeeded (a claim, which sets the lease, or a heartbeat), and

    margin = min(max(2 * heartbeat_interval, 0.2 * lease_timeout), 0.5 * lease_timeout)

Why that is safe: the database stamps the lease no earlier than the statement was sent, so the
worker's count starts no later than the database's. Clocks may disagree in offset (no reading of
one host's clock is compared with another's); their *rates* (the worker's monotonic clock against
the database's) must agree to within the margin over one lease, and the worker must be able to
exit within what is left of it (a process whose whole host is frozen, e.g. a paused VM, is not
covered). The margin also covers the fence's own wake-up delay and the rescuer's reading.

For normal beats never to fence, :func:`check` asks for room for two beats before the fence:
``2 * heartbeat_interval <= lease_timeout - margin`` (it works out as ``heartbeat_interval <=
lease_timeout / 4``).
"""

from __future__ import annotations


def margin(heartbeat_interval: float, lease_timeout: float) -> float:
    """Seconds before the lease's expiry at which a worker that could not renew stops."""
    return min(max(2 * heartbeat_interval, 0.2 * lease_timeout), 0.5 * lease_timeout)


def fence_after(heartbeat_interval: float, lease_timeout: float) -> float:
    """Seconds without a successful renewal after which a worker holding jobs stops."""
    return lease_timeout - margin(heartbeat_interval, lease_timeout)


def check(heartbeat_interval: float, lease_timeout: float) -> str | None:
    """Why this pair would fence on normal beats (a message naming the keys), or None."""
    after = fence_after(heartbeat_interval, lease_timeout)
    if 2 * heartbeat_interval <= after + 1e-9:
        return None
    return (
        f"expected at most a quarter of worker.lease_timeout ({lease_timeout!r}): a worker that "
        f"has not renewed its lease for lease_timeout - margin = {after:g} s stops itself "
        f"(fencing; margin {margin(heartbeat_interval, lease_timeout):g} s), and two beats must "
        f"fit in that time"
    )

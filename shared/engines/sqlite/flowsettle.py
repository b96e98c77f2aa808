"""A worker's batch of completions settles its completed parents once per statement, not once
per parent in the row trigger (the migration ``.flowschema.FLOW_SETTLE``).

The row trigger ran three statements for each completed parent, each a trigger program of its
own: for a chain's or a fan-in graph's job, about as much work again as the job's claim and
completion. Here, in the transaction of the completions that marked their rows
(``settle_mark``, which the trigger then skips), two statements settle all the batch's completed
parents: each waiting child counted off once by the number of its parents completed (pending at
none left), then the parents' edges marked done. The children's counts are added by the
transaction (``.tally``), with the claim's and the completions'. Nothing else changes: an edge
already done (written done at enqueue, or counted off before) is never counted again, a child no
longer waiting is left as it is, and failures and cancels are the trigger's, as before.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence

from . import tally

MARK = "settle_mark = 1 - settle_mark, "  # in a completion's SET: this transaction settles it

# ?1: the time, ?2: the completed parents' ids (a JSON array). The children's rows are marked for
# the counts (``tally``), which the transaction adds from what this returns.
_RELEASE = (
    "UPDATE jobs SET " + tally.MARK + "waiting_on = waiting_on - n.k, updated_at = ?1, "
    "status = CASE WHEN waiting_on <= n.k THEN 'pending' ELSE status END "
    "FROM (SELECT child, count(*) AS k FROM job_deps "
    "      WHERE parent IN (SELECT value FROM json_each(?2)) AND done = 0 GROUP BY child) AS n "
    "WHERE jobs.id = n.child AND jobs.status = 'waiting' "
    "RETURNING jobs.type, jobs.status, jobs.run_at > jobs.created_at"
)
_EDGES_DONE = (
    "UPDATE job_deps SET done = 1 WHERE parent IN (SELECT value FROM json_each(?1)) AND done = 0"
)


def settle_completed(c: Any, parents: Sequence[str], stamp: str) -> None:
    """Settle the waiting children of ``parents`` (jobs this transaction completed with
    :data:`MARK`, that have children) at ``stamp``, and add the children's counts."""
    if not parents:
        return
    ids = json.dumps(list(parents))
    cur = c.cursor()
    cur.row_factory = None  # plain tuples, whatever the connection's rows are
    rows = cur.execute(_RELEASE, (stamp, ids)).fetchall()
    c.execute(_EDGES_DONE, (ids,))
    deltas: Counter = Counter()
    for r in rows:
        t, status, delayed = r[0], r[1], r[2]
        if status == "pending":
            deltas[t, "waiting"] -= 1
            deltas[t, "pending"] += 1
            if delayed:
                deltas[t, "delayed"] += 1
    tally.add(c, deltas)

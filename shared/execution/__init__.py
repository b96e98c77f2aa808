"""The running side: what turns a claimed job into a handler call and its outcome.

Handler declarations (``handlers``, ``builtin_jobs``), one run (``runner``), its outcome
(``outcomes``), stopping a run from outside (``stopping``), per-job policy (``policy``), async
jobs (``asyncjobs``) and a worker's batch progress (``progress``).
"""

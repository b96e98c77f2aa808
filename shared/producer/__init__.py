"""The producer side: what an application calls to put work on the queue and follow it.

The queue (``api.JobQueue``), tasks (``tasks``) and their arguments (``taskargs``), handles and
waits (``handles``, ``waithub``, ``cancels``), workflows' shapes (``canvas``), jobs run in the
calling process (``inline``) and the check of the types enqueued (``typecheck``). A worker never
imports this room (tests/unit/test_layering.py).
"""

"""The model: the job and the values every side agrees on.

The job (``job``), jobq's errors (``errors``) and exit codes (``exitcodes``), the bounds on
input (``bounds``), retry (``retry``), per-type limits and keys (``limits``, ``keys``),
workflows (``flows``) and named queues (``queues``, ``queuenames``, ``unserved``).
"""

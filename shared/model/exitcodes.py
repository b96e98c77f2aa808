"""Process exit codes: an API between the supervisor, its workers and operators' scripts.

| code | name                | who       | meaning |
|------|---------------------|-----------|---------|
| 0    | OK                  | both      | clean exit (graceful stop, drained, retired by scale-down) |
| 1    | ERROR               | both      | unexpected error (a bug); the traceback is logged |
| 2    | USAGE               | both      | bad command-line arguments |
| 3    | CONFIG_INVALID      | both      | the config file is missing or invalid; nothing was started |
| 4    | BOOT_FAILED         | supervisor| a handler module failed to import; start-up halted, no crash loop |
| 5    | DATABASE_UNAVAILABLE| both      | the database cannot be opened or written and no wait heals it (shared.errors.StoreRefused: missing folder, read-only, not a database, bad URL, refused authentication, schema newer than the code); the supervisor's boot waits out the rest |
| 6    | ORPHANED            | worker    | the supervisor died; the worker stopped claiming and exited |
| 7    | RECYCLED            | worker    | max_jobs or max_memory_mb reached; replace me without back-off |
| 8    | WORKER_BOOT_FAILED  | worker    | the worker could not start (import error, exec failure); back off |
| 9    | NOT_RUNNING         | CLI       | an ops command needs a running supervisor and none was found |
| 10   | NOT_FOUND           | CLI       | a job named on the command line does not exist, or is not in a state the command applies to |
| 11   | FENCED              | worker    | the worker could not renew its lease in time and stopped
itself before the lease could expire (shared.runtime.fencing); its job runs again |
| 12   | DESCRIPTORS_CLOSED  | worker    | a handler closed the worker's own file descriptors (``os.closerange``): it exited at once without touching the database; its job runs again |
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    CONFIG_INVALID = 3
    BOOT_FAILED = 4
    DATABASE_UNAVAILABLE = 5
    ORPHANED = 6
    RECYCLED = 7
    WORKER_BOOT_FAILED = 8
    NOT_RUNNING = 9
    NOT_FOUND = 10
    FENCED = 11
    DESCRIPTORS_CLOSED = 12

    @classmethod
    def describe(cls, code: int) -> str:
        try:
            return cls(code).name.lower()
        except ValueError:
            return f"exit code {code}"

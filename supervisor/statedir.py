"""The supervisor's folder in the temporary directory (config snapshot, workers' progress files),
and the removal of folders that dead supervisors left behind.

The folder's name carries its owner's pid and start time, ``jobq-supervisor-<pid>-<ms>-<random>``:
a supervisor killed with SIGKILL cannot remove its folder, so every start removes the folders
whose supervisor is gone (the same pid *and* start time check as the database's owner tokens,
so a reused pid does not keep a folder alive). Folders in the old format
(``jobq-supervisor-<random>``) name no owner and are left alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from shared.runtime.processes import create_time_ms, host_id, token_alive

from shared.runtime.supervisorfolder import NAME as _NAME, PREFIX


def create(root: str | None = None) -> str:
    """Make this supervisor's folder (mode 0700) and return its path."""
    pid = os.getpid()
    return tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-{create_time_ms(pid) or 0}-", dir=root)


def remove_leftovers(root: str | None = None) -> list[str]:
    """Remove the folders of supervisors that are gone (ours only: same user); returns them."""
    root = root or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(root)
    except OSError:
        return []
    here, uid = host_id(), os.getuid()
    for name in names:
        m = _NAME.match(name)
        if m is None:
            continue
        path = os.path.join(root, name)
        try:
            if os.lstat(path).st_uid != uid or not os.path.isdir(path) or os.path.islink(path):
                continue
        except OSError:
            continue
        if token_alive(f"{here}:{m.group(1)}:{m.group(2)}", here):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            removed.append(path)
    return removed

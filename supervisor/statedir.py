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
import re
import shutil
import tempfile

from shared.runtime.processes import create_time_ms, host_id, token_alive

PREFIX = "jobq-supervisor-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-(\d+)-")


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


CODE_REQUEST = "reload-code"  # a file `jobq reload --code` leaves for the next reload


def of_pid(pid: int, root: str | None = None) -> str | None:
    """The folder of the live supervisor ``pid`` on this host, or None."""
    root = root or tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return None
    for name in names:
        m = _NAME.match(name)
        if m and int(m.group(1)) == pid:
            return os.path.join(root, name)
    return None


def ask_code_reload(pid: int) -> bool:
    """Leave the request in supervisor ``pid``'s folder; False when its folder is not found."""
    folder = of_pid(pid)
    if folder is None:
        return False
    with open(os.path.join(folder, CODE_REQUEST), "w"):
        pass
    return True


def take_code_request(folder: str) -> bool:
    """Was a code reload asked for (the request is removed)?"""
    try:
        os.unlink(os.path.join(folder, CODE_REQUEST))
    except OSError:
        return False
    return True

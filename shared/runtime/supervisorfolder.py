"""A supervisor's folder in the temporary directory, as other programs find it: its name carries
the owner's pid and start time (``jobq-supervisor-<pid>-<ms>-<random>``: made and swept by
:mod:`supervisor.statedir`), and ``jobq reload --code`` leaves a request file in it that the
supervisor's next reload takes (:mod:`supervisor.reload`).
"""

from __future__ import annotations

import os
import re
import tempfile

PREFIX = "jobq-supervisor-"
NAME = re.compile(re.escape(PREFIX) + r"(\d+)-(\d+)-")


CODE_REQUEST = "reload-code"  # a file `jobq reload --code` leaves for the next reload


def of_pid(pid: int, root: str | None = None) -> str | None:
    """The folder of the live supervisor ``pid`` on this host, or None."""
    root = root or tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return None
    for name in names:
        m = NAME.match(name)
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

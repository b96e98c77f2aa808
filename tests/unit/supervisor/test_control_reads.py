"""When the supervisor reads controls (``supervisor.controls``): every round while nothing
listens; once it listens, once per notification and every backstop period; and its workers are
told through the file, which goes when it stops listening."""

from __future__ import annotations

import os

from shared.runtime.controlfile import control_path
from supervisor.controls import Controls


def test_every_round_reads_while_nothing_listens(tmp_path):
    c = Controls()
    c.heard(False, False, str(tmp_path))
    assert all(c.due("scale", t, 10.0) for t in (0.0, 0.1, 0.2))
    assert not os.path.exists(control_path(str(tmp_path)))


def test_a_listening_supervisor_reads_once_per_notification_and_at_the_backstop(tmp_path):
    folder, c = str(tmp_path), Controls()
    c.heard(True, True, folder)  # connected: what came before the LISTEN is looked for
    assert os.path.exists(control_path(folder))
    assert c.due("scale", 0.0, 10.0) and c.due("running", 0.0, 10.0)
    assert not c.due("scale", 1.0, 10.0) and not c.due("running", 1.0, 10.0)
    before = os.stat(control_path(folder)).st_ino
    c.heard(True, True, folder)  # a control came: each reader reads once, the file is new
    assert os.stat(control_path(folder)).st_ino != before
    assert c.due("scale", 2.0, 10.0) and not c.due("scale", 3.0, 10.0)
    assert c.due("running", 3.0, 10.0)
    assert c.due("scale", 12.0, 10.0)  # the backstop
    c.heard(True, False, folder)  # nothing new: nothing read, the file kept
    assert not c.due("scale", 13.0, 10.0) and os.path.exists(control_path(folder))
    c.heard(False, False, folder)  # the connection is down: every round reads, the file goes
    assert not os.path.exists(control_path(folder))
    assert c.due("scale", 13.1, 10.0) and c.due("scale", 13.2, 10.0)

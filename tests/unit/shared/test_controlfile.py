"""A supervisor's word to its busy workers (``shared.runtime.controlfile``): a worker's check-in
reads cancel requests every time while there is no file, once per replacement of the file, and
every backstop period in between."""

from __future__ import annotations

from shared.runtime import controlfile
from shared.runtime.controlfile import ControlMark


def test_no_file_or_no_supervisor_means_every_check_in_reads(tmp_path):
    assert all(ControlMark(None, lambda: 10.0).look(t) for t in (0.0, 0.1, 0.2))
    mark = ControlMark(controlfile.control_path(str(tmp_path)), lambda: 10.0)
    assert all(mark.look(t) for t in (0.0, 0.1, 0.2))


def test_a_replaced_file_or_the_backstop_makes_a_check_in_read(tmp_path):
    folder = str(tmp_path)
    controlfile.poke(folder)
    mark = ControlMark(controlfile.control_path(folder), lambda: 10.0)
    assert mark.look(0.0)  # the first look: read once
    assert not mark.look(0.25) and not mark.look(9.0)
    controlfile.poke(folder)  # a control came
    assert mark.look(9.25) and not mark.look(9.5)
    assert mark.look(19.25)  # the backstop: 10 s after the last read
    controlfile.withdraw(folder)  # the supervisor no longer listens
    assert mark.look(19.5) and mark.look(19.75)
    controlfile.withdraw(folder)  # (twice: nothing to remove)

"""shared.runtime.supervisorfolder: a live supervisor's folder is found by pid, and a code-reload
request left in it is taken once."""

from __future__ import annotations

import os

from shared.runtime import supervisorfolder


def test_a_folder_is_found_by_its_pid_and_a_request_is_taken_once(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisorfolder.tempfile, "gettempdir", lambda: str(tmp_path))
    mine = tmp_path / f"{supervisorfolder.PREFIX}{os.getpid()}-123-abc"
    mine.mkdir()
    (tmp_path / f"{supervisorfolder.PREFIX}1-5-x").mkdir()  # another pid
    assert supervisorfolder.of_pid(os.getpid()) == str(mine)
    assert supervisorfolder.of_pid(2) is None
    assert supervisorfolder.take_code_request(str(mine)) is False
    assert supervisorfolder.ask_code_reload(os.getpid()) is True
    assert supervisorfolder.take_code_request(str(mine)) is True
    assert supervisorfolder.take_code_request(str(mine)) is False
    assert supervisorfolder.ask_code_reload(2) is False

"""shared.engines.filewatch: a watch of one file wakes on its writes, not on its neighbours'."""

from __future__ import annotations

import select

from shared.engines.filewatch import FileWatch


def _ready(watch: FileWatch) -> bool:
    return bool(select.select([watch.fileno()], [], [], 0)[0])


def test_a_write_of_the_file_wakes_the_watch_and_drain_resets_it(tmp_path):
    path = tmp_path / "notified"
    watch = FileWatch(str(path))
    try:
        assert watch.available and not _ready(watch)
        (tmp_path / "other").write_text("x")  # a neighbour: readable, but not for us
        assert _ready(watch) and watch.drain() is False
        path.write_text("\n")  # made for the first time
        assert _ready(watch) and watch.drain() is True
        assert not _ready(watch)
        path.write_text("\n")  # written again
        assert watch.drain() is True
    finally:
        watch.close()
    assert watch.fileno() == -1


def test_a_missing_folder_leaves_the_watch_unavailable(tmp_path):
    watch = FileWatch(str(tmp_path / "absent" / "notified"))
    assert not watch.available
    watch.close()

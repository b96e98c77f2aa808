"""shared.runtime.files: atomic writes and reading a file as written."""

from __future__ import annotations

import os

import pytest

from shared.runtime import files


def test_read_as_written_keeps_the_bom_and_line_ends_apart(tmp_path):
    p = tmp_path / "a.toml"
    p.write_bytes(b"\xef\xbb\xbfa = 1\r\nb = 2\r\n")
    assert files.read_as_written(p) == ("a = 1\r\nb = 2\r\n", files.BOM, "\r\n")
    p.write_bytes(b"a = 1\nb = 2\r\n")
    assert files.read_as_written(p) == ("a = 1\nb = 2\r\n", "", "\n")
    p.write_bytes(b"\r\n")
    assert files.read_as_written(p)[2] == "\r\n"
    p.write_bytes(b"")
    assert files.read_as_written(p) == ("", "", "\n")


def test_read_as_written_raises_on_bad_utf8(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_bytes(b"\xff\xfe")
    with pytest.raises(UnicodeDecodeError):
        files.read_as_written(p)


def test_write_atomic_keeps_mode_and_text_exactly(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("old")
    os.chmod(p, 0o600)
    files.write_atomic(p, "new\r\nline")
    assert p.read_bytes() == b"new\r\nline"
    assert p.stat().st_mode & 0o7777 == 0o600
    files.write_atomic(tmp_path / "g.txt", "x")
    assert (tmp_path / "g.txt").stat().st_mode & 0o7777 == 0o644
    assert sorted(q.name for q in tmp_path.iterdir()) == ["f.txt", "g.txt"]


def test_a_failed_write_leaves_the_file_and_no_temporary(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        files.write_atomic(p, "bad \udc80")
    assert p.read_text() == "old"
    assert [q.name for q in tmp_path.iterdir()] == ["f.txt"]

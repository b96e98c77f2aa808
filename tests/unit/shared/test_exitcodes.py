"""shared.model.exitcodes: exit codes are an API; their numbers never move."""

from __future__ import annotations

from shared.model.exitcodes import ExitCode


def test_the_numbers_are_fixed():
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0,
        "ERROR": 1,
        "USAGE": 2,
        "CONFIG_INVALID": 3,
        "BOOT_FAILED": 4,
        "DATABASE_UNAVAILABLE": 5,
        "ORPHANED": 6,
        "RECYCLED": 7,
        "WORKER_BOOT_FAILED": 8,
        "NOT_RUNNING": 9,
        "NOT_FOUND": 10,
        "FENCED": 11,
        "DESCRIPTORS_CLOSED": 12,
    }


def test_describe_names_known_codes_and_numbers_unknown_ones():
    assert ExitCode.describe(11) == "fenced"
    assert ExitCode.describe(0) == "ok"
    assert ExitCode.describe(99) == "exit code 99"
    assert ExitCode.describe(-9) == "exit code -9"

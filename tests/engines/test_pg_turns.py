"""Whose turn a job is (``shared.engines.postgres.turns``), the marks a host's processes leave
each other (``.marks``), and the slot statements on a real server. The relays and workers
together, on three hosts: tests/proofs/test_wakeup_turns.py."""

from __future__ import annotations

import subprocess
import sys
import zlib

import pytest

from shared.engines.postgres.marks import IDLE, RELAY, Marks
from shared.engines.postgres.turns import (
    FALLBACK,
    JOINED,
    LANES,
    SLOTS,
    TAKE_SLOT,
    VIEW,
    Turns,
    channels,
    lane_channel,
    lanes,
    lock_key,
    parse,
    passed,
    payload,
    wake,
    wake_one,
)
from tests.engines import postgres_url, require_postgres
from tests.proc import wait_until


def _relay(slot: int, view: list[int]) -> Turns:
    t = Turns()
    t.joined(slot, view, now=0.0)
    return t


def test_payloads_carry_a_number_or_wake_every_host():
    jid = "01a2516b4c7346e7f9b2094d77e87a37"
    assert payload(jid) == str(zlib.crc32(jid.encode()))
    assert parse(payload(jid)) == (zlib.crc32(jid.encode()), 0)
    assert parse(passed(7, 2)) == (7, 2)
    for everyone in ("", JOINED, "x", "1.x", "-3"):
        assert parse(everyone) is None


def test_each_number_is_exactly_one_relays_turn():
    view = [0, 3, 9]
    relays = [_relay(s, view) for s in view]
    for number in range(30):
        takers = [i for i, r in enumerate(relays) if r.hear(str(number), 0.0) not in (False,)]
        assert takers == [number % 3]


def test_each_lane_reaches_its_turns_relay_and_the_one_after_it_only():
    for n in (1, 2, 3, 5, 20):
        view = list(range(0, 2 * n, 2))
        relays = [_relay(s, view) for s in view]
        for lane in range(LANES):
            hearing = sorted(i for i, r in enumerate(relays) if lane in r.lanes())
            assert hearing == sorted({lane % n, (lane % n + 1) % n}), (n, lane)
    assert _relay(7, [0, 1]).lanes() == set(range(LANES))  # not in its view: every lane


def test_one_job_goes_to_its_lane_with_its_number_and_a_batch_to_everyone():
    channel, number = wake("jobq_x", ["abc"])
    assert number == payload("abc") and channel == lane_channel("jobq_x", int(number) % LANES)
    assert wake("jobq_x", ["a", "b"]) == ("jobq_x", "")
    assert channels("jobq_x")[0] == "jobq_x" and len(set(channels("jobq_x"))) == LANES + 1
    assert all(len(c) <= 63 for c in channels("jobq_x"))
    named = lanes("jobq_x")
    assert named == tuple(channels("jobq_x")[1:])
    for job_id in ("abc", "0190aa", "f" * 32):
        assert wake_one(named, job_id) == wake("jobq_x", [job_id])


def test_the_next_ranked_relay_owes_a_fallback_and_only_it():
    view = [0, 1, 2]
    relays = [_relay(s, view) for s in view]
    for r in relays:
        r.hear("4", now=10.0)  # turn of rank 1: rank 2 falls back
    assert [r.next_due() for r in relays] == [None, None, 10.0 + FALLBACK]
    assert relays[2].due(10.0) == []
    assert relays[2].due(10.0 + FALLBACK) == [(4, 1)]  # its turn now, one hop on
    assert relays[2].next_due() is None


def test_a_turn_passed_on_is_the_next_relays_and_stops_after_every_relay_had_it():
    view = [0, 1, 2]
    relays = [_relay(s, view) for s in view]
    assert relays[2].hear(passed(4, 1), 0.0) == (4, 1)
    assert relays[2].may_pass(1)
    assert relays[0].hear(passed(4, 2), 0.0) == (4, 2)
    assert not relays[0].may_pass(2)  # back to rank 1 would go round again: it waits instead
    # a relay that owed a fallback for the number and got it passed on forgets the fallback
    r = relays[2]
    r.hear("4", 0.0)
    assert r.next_due() is not None
    r.hear(passed(4, 1), 0.0)
    assert r.next_due() is None


def test_a_relay_missing_from_its_view_or_without_a_slot_wakes_on_everything():
    assert _relay(5, [0, 1]).hear("1", 0.0) is True
    assert _relay(None, [0, 1]).hear("1", 0.0) is True  # type: ignore[arg-type]
    assert _relay(0, [0]).hear("12345", 0.0) == (12345, 0)  # one host: always its turn
    assert _relay(0, [0]).next_due() is None


def test_a_view_goes_stale():
    t = _relay(0, [0])
    assert not t.stale(1.0)
    assert t.stale(60.0)


def test_marks_are_seen_by_other_processes_only(tmp_path):
    path = str(tmp_path / "m" / "x.marks")
    mine = Marks(path)
    code = (
        "import sys, time; from shared.engines.postgres.marks import Marks; "
        "m = Marks(sys.argv[1]); m.hold(int(sys.argv[2])); print('held', flush=True); "
        "sys.stdin.read()"
    )
    assert mine.elsewhere(IDLE) is False and mine.elsewhere(RELAY) is False
    mine.hold(IDLE)
    assert mine.elsewhere(IDLE) is False  # our own lock never conflicts with our test
    child = subprocess.Popen(
        [sys.executable, "-c", code, path, str(IDLE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "held"  # a read lock beside ours
        other = Marks(path)
        try:
            assert other.elsewhere(IDLE) is True and other.elsewhere(RELAY) is False
        finally:
            other.close()
    finally:
        child.stdin.close()
        child.wait(10)
    mine.release(IDLE)
    assert mine.elsewhere(IDLE) is False
    mine.close()


def test_a_relay_takes_the_lowest_free_slot_and_only_that_one():
    require_postgres()
    psycopg = pytest.importorskip("psycopg")
    key = lock_key("jobq_turns_unit_test")
    sessions = [psycopg.connect(postgres_url(), autocommit=True) for _ in range(3)]
    try:
        took = [c.execute(TAKE_SLOT, {"n": SLOTS - 1, "key": key}).fetchone()[0] for c in sessions]
        assert took == [0, 1, 2]
        view = [r[0] for r in sessions[0].execute(VIEW, {"key": key}).fetchall()]
        assert view == [0, 1, 2]
        sessions[1].close()  # a host gone: its slot with its session (as its backend exits)
        wait_until(
            lambda: [r[0] for r in sessions[0].execute(VIEW, {"key": key}).fetchall()] == [0, 2],
            timeout=10,
            what="the closed session's slot freed",
        )
        again = psycopg.connect(postgres_url(), autocommit=True)
        sessions.append(again)
        assert again.execute(TAKE_SLOT, {"n": SLOTS - 1, "key": key}).fetchone()[0] == 1
    finally:
        for c in sessions:
            c.close()

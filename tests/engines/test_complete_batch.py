"""A batch's completions on SQLite: one statement padded to the next power of two rows, so a
worker's commits use a dozen statement texts (each prepared once, then found in the
connection's statement cache) instead of one per batch size; the padding matches no job."""

from __future__ import annotations

import dataclasses

from shared.runtime.clock import FakeClock, iso
from shared.engines.sqlite.finish import _complete_many
from shared.engines.sqlite.store import SqliteStore
from shared.model.job import Finish, NewJob, new_id

OWNER, OTHER, PID = "h:1:1", "h:2:2", 1


def test_completions_of_any_batch_size_share_a_dozen_statements():
    texts = {_complete_many(n, counted)[0] for n in range(1, 1001) for counted in (False, True)}
    assert len(texts) <= 2 * 11
    for n in (1, 2, 3, 5, 64, 65, 1000):
        assert n <= _complete_many(n, True)[1] < 2 * n


def test_a_padded_batch_completes_exactly_its_own_jobs(tmp_path):
    """5 completions (padded to 8): the 4 whose guard matches are recorded, a lost lease (an
    attempt that is not the job's) is not, and the running jobs outside the batch stay as
    they were; the counts move by exactly the 4."""
    clock = FakeClock()
    with SqliteStore(str(tmp_path / "jobq.db")) as store:
        store.enqueue(
            [NewJob(new_id(), "t", "{}", 0, clock.now(), None, None) for _ in range(9)], clock.now()
        )
        jobs = store.claim(OWNER, PID, clock.now(), 9)
        t = clock.advance(1)
        batch = [
            Finish("completed", j.id, 1, f'"{k}"', started=t - 0.5, ended=t - 0.25)
            for k, j in enumerate(jobs[:5])
        ]
        batch[2] = dataclasses.replace(batch[2], attempt=2)  # not this attempt: the lease was lost
        done, claimed = store.finish_and_claim(batch, OWNER, PID, clock.now(), 0)
        assert (done, claimed) == ([True, True, False, True, True], [])
        after = {j.id: store.get(j.id) for j in jobs}
        assert [after[j.id].status for j in jobs] == ["completed"] * 2 + ["running"] + [
            "completed"
        ] * 2 + ["running"] * 4
        assert after[jobs[0].id].result == "0" and after[jobs[4].id].result == "4"
        assert after[jobs[1].id].completed_at == iso(t - 0.25) and after[
            jobs[1].id
        ].started_at == iso(t - 0.5)
        assert store.counts() == {"completed": 4, "running": 5}


def test_a_batchs_completion_parameters_are_built_before_the_write_lock(tmp_path, monkeypatch):
    """8 workers on 2 cores hold the write lock most of a drain: the per-job Python of the
    completion statement's parameters runs before ``BEGIN IMMEDIATE``, and the statement made
    there is the one run in the transaction."""
    import shared.engines.sqlite.finish as finish
    import shared.engines.sqlite.store as store_mod

    clock, seen, real = FakeClock(), [], finish.completions

    def spied(*args, **kwargs):
        seen.append(store.conn.in_transaction)
        return real(*args, **kwargs)

    monkeypatch.setattr(store_mod, "completions", spied)
    monkeypatch.setattr(finish, "completions", spied)
    with SqliteStore(str(tmp_path / "jobq.db")) as store:
        store.enqueue(
            [NewJob(new_id(), "t", "{}", 0, clock.now(), None, None) for _ in range(6)], clock.now()
        )
        jobs = store.claim(OWNER, PID, clock.now(), 3)
        t = clock.advance(1)
        batch = [Finish("completed", j.id, 1, None, started=t - 0.5, ended=t - 0.25) for j in jobs]
        done, claimed = store.finish_and_claim(batch, OWNER, PID, clock.now(), 3)
        assert done == [True] * 3 and len(claimed) == 3
        assert seen == [False]  # built once, outside the transaction
        assert store.counts() == {"completed": 3, "running": 3}


def test_a_batchs_completion_binds_no_none_and_stores_what_none_meant(tmp_path):
    """Python's sqlite3 binds None through its adapter lookup (several times a text's cost, on
    every job's path): a completion without result, start or progress, and the padding rows,
    bind empty text (and attempt -1) instead; stored, they still mean no result, the claim's
    start, the progress the check-in wrote; a completion that has them writes them."""
    from shared.engines.sqlite.finish import completions

    clock = FakeClock()
    with SqliteStore(str(tmp_path / "jobq.db")) as store:
        store.enqueue(
            [NewJob(new_id(), "t", "{}", 0, clock.now(), None, None) for _ in range(3)], clock.now()
        )
        jobs = store.claim(OWNER, PID, clock.now(), 3)
        store.conn.execute("UPDATE jobs SET progress = '{\"n\": 1}'")  # as the check-in writes
        t = clock.advance(1)
        batch = [Finish("completed", j.id, 1, None, ended=t) for j in jobs[:2]]
        batch.append(
            Finish("completed", jobs[2].id, 1, '"r"', started=t - 1, ended=t, progress="7")
        )
        _, params = completions(batch, OWNER, iso(t), counted=True)
        assert None not in params and len(params) == 2 + 6 * 4  # 3 rows padded to 4
        done, _ = store.finish_and_claim(batch, OWNER, PID, clock.now(), 0)
        assert done == [True] * 3
        plain, full = store.get(jobs[0].id), store.get(jobs[2].id)
        assert plain.status == "completed" and plain.result is None and plain.progress == {"n": 1}
        assert plain.started_at == jobs[0].started_at and plain.completed_at == iso(t)
        assert (full.result, full.progress, full.started_at) == ("r", 7, iso(t - 1))
        assert store.counts() == {"completed": 3}

"""Pooled mode's statement rewriting (shared.engines.postgres.pooling): every relation jobq names
gets its schema, nothing else changes. (The proofs through a real PgBouncer are in
tests/proofs/test_pooler.py.)"""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from shared.engines.postgres.pooling import Qualifier, local_limits, refuses_options  # noqa: E402


@pytest.mark.parametrize(
    "sql, want",
    [
        ("SELECT 1 FROM jobs WHERE a", 'SELECT 1 FROM "q".jobs WHERE a'),
        (
            "UPDATE jobs SET t = db_now() FROM processes p",
            'UPDATE "q".jobs SET t = "q".db_now() FROM "q".processes p',
        ),
        (
            "INSERT INTO job_counts (type) VALUES (1)",
            'INSERT INTO "q".job_counts (type) VALUES (1)',
        ),
        ("DELETE FROM jobs j USING job_deps d", 'DELETE FROM "q".jobs j USING "q".job_deps d'),
        ("x(NULL::jobs, %s)", 'x(NULL::"q".jobs, %s)'),
        ("ANALYZE jobs", 'ANALYZE "q".jobs'),
        # not relations: an output column, a column of the table, a literal, a longer name
        ('SELECT count(*) AS jobs FROM "q".jobs', 'SELECT count(*) AS jobs FROM "q".jobs'),
        ("SELECT jobs.id, 'jobs' FROM jobs_x", "SELECT jobs.id, 'jobs' FROM jobs_x"),
    ],
)
def test_statements_name_jobqs_relations_by_schema(sql, want):
    q = Qualifier("q")
    assert q(sql) == want
    assert q(sql) is q(sql)  # rewritten once, kept
    assert q.query(sql.encode()) == want.encode()


def test_limits_per_transaction_and_the_poolers_refusal():
    got = local_limits({"lock_timeout": "500", "tcp_keepalives_idle": "4"})
    assert got == "SELECT set_config('lock_timeout', '500', true)"
    assert local_limits({"tcp_user_timeout": "1"}) is None
    assert refuses_options(Exception("FATAL:  unsupported startup parameter: options"))
    assert not refuses_options(Exception("password authentication failed"))

"""The shared SQL layer's parameter translation (shared.engines.sql.dialect)."""

from shared.engines.sql import Dialect
from shared.model.job import NewJob

PG = Dialect("postgresql", named=False, counts="job_counts", seconds="{end} - {start}")
LITE = Dialect("sqlite", named=True, counts="job_counts", seconds="{end} - {start}")


def test_named_parameters_become_pyformat_and_casts_and_literals_stay():
    sql = "SELECT x::float8, 'a:b', ':c' FROM t WHERE id = :id AND n LIKE '5%' AND y=:y_2"
    assert PG.sql(sql) == (
        "SELECT x::float8, 'a:b', ':c' FROM t WHERE id = %(id)s AND n LIKE '5%%' AND y=%(y_2)s"
    )


def test_sqlite_takes_the_statement_as_written():
    sql = "SELECT 1 WHERE a = :a AND b LIKE '5%'"
    assert LITE.sql(sql) is sql


def test_between_formats_the_seconds_template():
    assert PG.between("ended_at", "started_at") == "ended_at - started_at"


# -- the transitions' fields (the engines' own dialects, run on their databases) -----------------


def test_a_list_is_one_array_parameter_or_spelt_out():
    arrays = Dialect("x", named=False, counts="c", seconds="", arrays=True)
    assert arrays.member("id", "ids", ("a", "b")) == ("id = ANY(:ids)", {"ids": ["a", "b"]})
    assert arrays.member("type", "full", ["a"], negate=True) == (
        "type <> ALL(:full)",
        {"full": ["a"]},
    )
    assert LITE.member("id", "ids", ["a", "b"]) == (
        "id IN (:ids0, :ids1)",
        {"ids0": "a", "ids1": "b"},
    )
    assert LITE.member("type", "full", ["a"], negate=True) == (
        "type NOT IN (:full0)",
        {"full0": "a"},
    )
    assert (
        LITE.member("id", "ids", []) == ("1 = 0", {})
        and LITE.member("id", "ids", [], negate=True)[0] == "1 = 1"
    )


def test_a_write_wakes_idle_workers_in_the_same_statement_where_the_engine_notifies():
    notifying = Dialect(
        "x", named=False, counts="c", seconds="", notify="SELECT pg_notify(:channel, '')"
    )
    assert (
        notifying.waking("UPDATE t SET a = 1")
        == "WITH w AS (UPDATE t SET a = 1) SELECT pg_notify(:channel, '')"
    )
    assert LITE.waking("UPDATE t SET a = 1") == "UPDATE t SET a = 1"


def test_each_engines_lists_select_what_they_name(engine):
    """``member`` as each engine spells it, run there: the rows it names, none for an empty list,
    every one for an empty exclusion."""
    with engine.open() as store:
        a, b, c, z = ("0" * 31 + x for x in "abcf")  # ids as jobq writes them (uuids there)
        rows = [(a, "t1"), (b, "t2"), (c, "t1")]
        store.enqueue(
            [NewJob(i, t, "{}", 0, 1_700_000_000.0, None, None) for i, t in rows], 1_700_000_000.0
        )

        def ids(expr: str, values: list[str], negate: bool = False) -> list[str]:
            kind = "id" if expr == "id" else None
            where, params = store.dialect.member(expr, "v", values, negate, kind)
            return [
                r["id"]
                for r in store._rows(f"SELECT id FROM jobs WHERE {where} ORDER BY id", params)
            ]

        assert ids("id", [a, c, z]) == [a, c] and ids("type", ["t1"], negate=True) == [b]
        assert ids("id", []) == [] and ids("id", [], negate=True) == [a, b, c]

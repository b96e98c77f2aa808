"""The shared SQL layer's parameter translation (shared.engines.sql.dialect)."""
from shared.engines.sql import Dialect

PG = Dialect("postgresql", named=False, counts="job_counts", seconds="{end} - {start}")
LITE = Dialect("sqlite", named=True, counts="job_counts", seconds="{end} - {start}")


def test_named_parameters_become_pyformat_and_casts_and_literals_stay():
    sql = "SELECT x::float8, 'a:b', ':c' FROM t WHERE id = :id AND n LIKE '5%' AND y=:y_2"
    assert PG.sql(sql) == ("SELECT x::float8, 'a:b', ':c' FROM t WHERE id = %(id)s "
                           "AND n LIKE '5%%' AND y=%(y_2)s")


def test_sqlite_takes_the_statement_as_written():
    sql = "SELECT 1 WHERE a = :a AND b LIKE '5%'"
    assert LITE.sql(sql) is sql


def test_between_formats_the_seconds_template():
    assert PG.between("ended_at", "started_at") == "ended_at - started_at"

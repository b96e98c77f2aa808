"""Pure helpers of the ops CLI: the TOML line editor, durations, percentiles, rendering, and the
`config init` template (complete and at the defaults)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.settings.config import SCHEMA, Config, from_dict
from shared.settings.durations import parse_duration, parse_seconds
from supervisor.views import render
from shared.ops import stats
from supervisor.cli.template import default_toml
from supervisor.cli.tomledit import EditError, parse_value, set_key, toml_value

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())

FILE = """\
# top comment
database = "q.db"   # where the data lives
handlers = [
    "a.jobs",  # the first
    "b.jobs",
]

[supervisor]
# how many
workers = 2  # two for now
kill_grace = 5

# a comment about the next table
[worker]
poll_interval = 1
"""


def test_set_key_replaces_only_the_value_and_keeps_comments():
    out = set_key(FILE, "supervisor", "workers", 8)
    assert out == FILE.replace("workers = 2  # two for now", "workers = 8  # two for now")


def test_set_key_rewrites_a_multi_line_value_and_keeps_the_rest():
    out = set_key(FILE, "", "handlers", ["c.jobs"])
    assert tomllib.loads(out)["handlers"] == ["c.jobs"]
    assert out.startswith(
        '# top comment\ndatabase = "q.db"   # where the data lives\nhandlers = ["c.jobs"]\n\n[supervisor]'
    )


def test_set_key_inserts_after_the_tables_last_key_or_appends_the_table():
    out = set_key(FILE, "supervisor", "shutdown_timeout", 60)
    assert (
        "kill_grace = 5\nshutdown_timeout = 60\n\n# a comment about the next table\n[worker]" in out
    )
    out = set_key(FILE, "retry", "max_attempts", 5)
    assert out.endswith("poll_interval = 1\n\n[retry]\nmax_attempts = 5\n")
    out = set_key(FILE, "", "log_format", "json")
    assert 'log_format = "json"\n\n[supervisor]' in out


def test_set_key_refuses_layouts_it_cannot_edit_in_place():
    with pytest.raises(EditError, match="by hand"):
        set_key("supervisor.workers = 2\n", "supervisor", "workers", 3)
    with pytest.raises(EditError, match="not valid TOML"):
        set_key("workers = = 2\n", "supervisor", "workers", 3)


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.integers(-(10**6), 10**6),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.booleans(),
        st.lists(st.text(max_size=5), max_size=3),
    )
)
def test_set_key_round_trips_any_value(value):
    out = set_key(FILE, "worker", "poll_interval", value)
    assert tomllib.loads(out)["worker"]["poll_interval"] == value
    assert out.replace(f"poll_interval = {toml_value(value)}", "poll_interval = 1") == FILE


def test_parse_value_reads_toml_or_falls_back_to_text():
    assert parse_value("3") == 3 and parse_value("2.5") == 2.5 and parse_value("true") is True
    assert parse_value('["a", "b"]') == ["a", "b"]
    assert parse_value("json") == "json" and parse_value('"x y"') == "x y"


# One grammar for the CLI (--delay, --older-than) and the file ([retention]):
# shared.settings.durations.
@pytest.mark.parametrize(
    "text,seconds",
    [
        ("90", 90),
        ("30s", 30),
        ("5m", 300),
        ("1h30m", 5400),
        ("7d", 604800),
        ("2w", 1209600),
        ("250ms", 0.25),
        ("1.5h", 5400),
        (" 2D ", 172800),
        ("1w2d3h4m5s", 788645),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_seconds(text) == pytest.approx(seconds)
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "7x", "-5s", "s", "5 d", "1h30", "nan", "inf", "7 days", "forever"]
)
def test_parse_duration_refuses_nonsense_naming_the_value(text):
    with pytest.raises(ValueError, match=f"{text!r} is not a duration"):
        parse_seconds(text)
    with pytest.raises(ValueError, match=f"{text!r} is not a duration"):
        parse_duration(text)


def test_never_is_a_file_duration_only():
    assert parse_duration("never") is None and parse_duration(" Never ") is None
    with pytest.raises(ValueError, match="'never' is not a duration"):
        parse_seconds("never")


def test_the_cli_and_the_file_accept_the_same_durations():
    """Regression: "1h30m" worked for --delay but was refused in [retention]."""
    from supervisor.cli import build_parser

    args = build_parser().parse_args(["purge", "--older-than", "1h30m"])
    assert args.older_than == 5400
    cfg = from_dict({"retention": {"completed_after": "1h30m", "failed_after": "250ms"}})
    assert parse_duration(cfg.retention.completed_after) == 5400


def test_percentiles_and_cumulative_buckets():
    v = sorted(float(i) for i in range(1, 101))
    assert (stats.percentile(v, 50), stats.percentile(v, 99), stats.percentile(v, 100)) == (
        50.0,
        99.0,
        100.0,
    )
    assert stats.summary([]) == {"p50": None, "p90": None, "p99": None, "max": None}
    assert stats.cumulative([0.001, 0.02, 0.02, 400.0], (0.01, 0.05, 1.0)) == [1, 3, 3, 4]


def test_render_helpers():
    assert [render.duration(s) for s in (None, 0, 0.0042, 0.85, 12.34, 245, 7380, 277200)] == [
        "-",
        "0.0ms",
        "4.2ms",
        "850ms",
        "12.3s",
        "4m05s",
        "2h03m",
        "3d05h",
    ]
    assert render.size(0) == "0 B" and render.size(1536) == "1.5 KiB"
    assert render.sparkline([0, 1, None, 8]) == "▁▂ █"
    tb = "Traceback (most recent call last):\n  File x\nValueError: bad\n"
    assert render.error_line(tb) == "ValueError: bad"
    assert render.table(["A", "N"], [["x", 1], ["yy", 10]]) == "A    N\nx    1\nyy  10"


def test_the_engine_gauges_are_shown_with_the_engines_own_labels():
    size = {"key": "log_bytes", "label": "LOG", "unit": "bytes", "value": 1258291}
    count = {"key": "backends", "label": "backends", "unit": "", "value": 3}
    assert render.gauges_note({"gauges": [size]}) == " (LOG 1.2 MiB)"
    assert render.gauges_note({"gauges": [size, count]}) == " (LOG 1.2 MiB, backends 3)"
    assert render.gauges_note({"gauges": []}) == "" and render.gauges_note({}) == ""


def test_config_init_template_holds_every_key_at_its_default():
    data = tomllib.loads(default_toml())
    cfg = from_dict(data)
    assert cfg == Config()
    for section, keys in SCHEMA.items():
        for key in keys:
            dotted = f"{section}.{key}" if section else key
            assert key in (data[section] if section else data), dotted
            assert keys[key].doc, f"describe {dotted} where shared/settings/config.py declares it"
            assert f"# {keys[key].doc.split()[0]}" in default_toml(), dotted


def test_shipped_jobq_toml_documents_the_metrics_keys():
    text = (ROOT / "jobq.toml").read_text()
    data = tomllib.loads(text)
    assert data["metrics_port"] == 0 and data["metrics_host"] == "127.0.0.1"
    assert "# Prometheus metrics" in text

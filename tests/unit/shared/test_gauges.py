"""shared.ops.gauges: the engine's own gauges, those with a value now, in the engine's order."""

from __future__ import annotations

from types import SimpleNamespace

from shared.ops.gauges import read


def gauge(key):
    return SimpleNamespace(key=key, label=key.upper(), help=f"about {key}", unit="bytes")


def test_gauges_without_a_value_are_left_out_in_the_engines_order():
    store = SimpleNamespace(
        gauges=(gauge("wal"), gauge("cache"), gauge("pages")),
        stats=lambda: {"pages": 3, "wal": 0, "cache": None, "extra": 9},
    )
    assert read(store) == [
        {"key": "wal", "label": "WAL", "help": "about wal", "unit": "bytes", "value": 0},
        {"key": "pages", "label": "PAGES", "help": "about pages", "unit": "bytes", "value": 3},
    ]
    assert read(SimpleNamespace(gauges=(), stats=lambda: {})) == []

"""Commented ``jobq.toml`` files generated from the config's key table
(:mod:`shared.settings.config`).

:func:`default_toml` is what ``jobq config init`` writes (every key at its default);
:func:`shipped_toml` is the ``jobq.toml`` at the top of the repository (the defaults, the example
handlers and the daily cleanup schedule). Both take each key's description, default and accepted
values from its declaration, so a key added there appears here at once.
``python -m supervisor.gendocs`` rewrites the shipped file; a test fails when it is stale.
"""

from __future__ import annotations

import textwrap
from typing import Any

from shared.settings.config import (
    QUEUE_KEYS,
    SCHEDULE_KEYS,
    TYPE_KEYS,
    Config,
    QueueConfig,
    ScheduleConfig,
    TypeConfig,
)
from shared.settings.schema import Key, keys_of, sections_of

from .tomledit import toml_value

WIDTH = 98
INIT_HEADER = """\
jobq configuration (written by `jobq config init`). Every key is optional; the values below are
the defaults. Times are in seconds unless a key says it takes a duration ("1h30m", "7d"). Edit
this file while the supervisor runs: it reloads within a few seconds (or at once on SIGHUP,
`jobq reload`) and applies the new settings to new claims. `jobq config set KEY VALUE` edits one
key and keeps these comments. Reference: docs/configuration.md.
"""
SHIPPED_HEADER = """\
jobq configuration. Every key is optional; the values below are the defaults unless marked
"not the default". Times are in seconds unless a key says it takes a duration ("1h30m", "7d").
Edit this file while the supervisor runs: it reloads within a few seconds (or at once on SIGHUP)
and applies the new settings to new claims. Reference: docs/configuration.md. This file is
generated from shared/settings/config.py by `python -m supervisor.gendocs`.
"""
CLEANUP = ScheduleConfig(name="cleanup-old-data", type="cleanup:old-data", cron="15 3 * * *")
SCHEDULE_EXAMPLE = {
    "name": "daily-revenue-report",
    "type": "report:generate",
    "cron": "0 8 * * *",
    "timezone": "America/New_York",
    "payload": {"reportId": "daily-revenue", "format": "pdf"},
}
TYPE_EXAMPLE = {
    "concurrency": 2,
    "rate": "10/min",
    "max_attempts": 5,
    "timeout": 120,
    "queue": "reports",
    "key": "payload.customer_id",
    "concurrency_per_key": 2,
    "rate_per_key": "10/min",
    "fair": True,
    "priority": 0,
    "backoff_base": 1,
    "backoff_max": 60,
}


def default_toml() -> str:
    """The text of a commented ``jobq.toml`` holding every key at its default."""
    return config_toml(Config(), INIT_HEADER)


def shipped_toml() -> str:
    """The text of the repository's ``jobq.toml``."""
    return config_toml(
        Config(handlers=("examples.handlers", "examples.tasks"), schedules=(CLEANUP,)),
        SHIPPED_HEADER,
        marked={"handlers"},
    )


def config_toml(cfg: Config, header: str, marked: frozenset[str] | set[str] = frozenset()) -> str:
    """``cfg`` as commented TOML: each key with its description; keys in ``marked`` are flagged
    as not the default; then the schedules of ``cfg`` and commented examples of both tables."""
    data = cfg.to_dict()
    out = _comment(header) + ["\n"]
    out += _table("", Config, data, marked)
    for name, (cls, doc) in sections_of(Config).items():
        out += (
            [f"\n[{name}]\n"]
            + _comment(_plain(doc))
            + ["\n"]
            + _table(name, cls, data[name], marked)
        )
    out += _schedules(cfg)
    out += _types()
    out += _queues()
    return "".join(out)


def _table(
    section: str, cls: type, values: dict[str, Any], marked: set[str] | frozenset[str]
) -> list[str]:
    out = []
    for key, spec in keys_of(cls).items():
        dotted = f"{section}.{key}" if section else key
        note = " (not the default)" if dotted in marked else ""
        out += _comment(_describe(spec) + note)
        out.append(f"{key} = {_value(values.get(key))}\n")
    return out


def _schedules(cfg: Config) -> list[str]:
    out = ["\n"] + _comment(
        "Recurring jobs. " + _plain(ScheduleConfig.__doc__) + " Editing or "
        "removing an entry takes effect on reload. The keys of an entry:"
    )
    for key, spec in SCHEDULE_KEYS.items():
        out += _comment(f"  {key}: {spec.doc}", indent="#       ")
    for s in cfg.schedules:
        out += _comment(
            "The built-in job cleanup:old-data deletes finished jobs as [retention] says "
            "(not the default: without this entry nothing is deleted)."
        )
        out.append("[[schedule]]\n")
        out += [f"{k} = {_value(v)}\n" for k, v in vars(s).items()]
    out += ["\n", "# Another example (uncomment to use):\n", "# [[schedule]]\n"]
    out += [f"# {k} = {_value(v)}\n" for k, v in SCHEDULE_EXAMPLE.items()]
    return out


def _types() -> list[str]:
    out = ["\n"] + _comment(_plain(TypeConfig.__doc__) + " For example:")
    out.append('# [types."report:generate"]\n')
    for key, spec in TYPE_KEYS.items():
        example = TYPE_EXAMPLE.get(key)
        value = _value(example) if example is not None else f"<{spec.expected}>"
        out.append(f"# {key} = {value}".ljust(28) + f"# {spec.doc}\n")
    return out


def _queues() -> list[str]:
    out = ["\n"] + _comment(_plain(QueueConfig.__doc__) + " For example:")
    for name, keys in (("emails", {"workers": 2}), ("reports", {"weight": 1, "paused": False})):
        out.append(f"# [queues.{name}]\n")
        out += [
            f"# {k} = {_value(v)}".ljust(28) + f"# {QUEUE_KEYS[k].doc}\n" for k, v in keys.items()
        ]
    return out


def _plain(doc: str) -> str:
    """A section's docstring without its leading "`[name]`: " (the header says that already)."""
    text = " ".join(doc.split())
    if text.startswith("`[") and "`: " in text:
        text = text.split("`: ", 1)[1]
        text = text[0].upper() + text[1:]
    return text.replace("``", "`")


def _describe(spec: Key) -> str:
    """A key's description, and what it accepts when that is a fixed list of words."""
    if spec.expected.startswith("one of") and "one of" not in spec.doc:
        return f"{spec.doc} One of: {spec.expected[len('one of ') :]}."
    return spec.doc


def _comment(text: str, indent: str = "# ") -> list[str]:
    lines = []
    for para in text.strip().split("\n\n"):
        lines += textwrap.wrap(
            " ".join(para.split()), WIDTH - 2, initial_indent="# ", subsequent_indent=indent
        )
    return [ln + "\n" for ln in lines]


def _value(value: Any) -> str:
    if value is None:
        return '""'
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, dict):  # an inline table
        return "{" + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + "}"
    return toml_value(value)

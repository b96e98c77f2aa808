"""``docs/configuration.md``: the configuration reference, generated from the key table in
:mod:`shared.settings.config` (``jobq config reference`` prints it; ``python -m supervisor.gendocs``
writes it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from shared.settings.config import Config, QueueConfig, ScheduleConfig, TypeConfig
from shared.settings.schema import keys_of, sections_of
from shared.settings.durations import DURATION_EXPECTED

from .template import _plain, _value

INTRO = f"""\
# Configuration reference

<!-- Generated from shared/settings/config.py by `python -m supervisor.gendocs`; do not edit by hand. -->

jobq reads one TOML file: `--config PATH`, else `$JOBQ_CONFIG`, else `./jobq.toml`. Every key is
optional. The file is validated strictly: an unknown key, a wrong type or an out-of-range value
stops start-up (exit code 3) with a message naming the file, the dotted key, the value and what
was expected. A running supervisor re-reads the file every `supervisor.config_poll_interval`
seconds and at once on SIGHUP (`jobq reload`); a file it refuses is logged and the old settings
stay.

- `jobq config init` writes a commented file with every key at its default.
- `jobq config show [--effective]` prints the file (or every effective value).
- `jobq config set KEY VALUE` sets one dotted key (`supervisor.workers 4`), keeping comments;
  a value the config refuses leaves the file as it was.
- `jobq config reference` prints this page.

Times are numbers of seconds, except keys that take a **duration**: {DURATION_EXPECTED}.
The command line (`--delay`, `--older-than`) uses the same duration grammar, without "never".
"""


def reference_markdown() -> str:
    """The text of ``docs/configuration.md``."""
    defaults = Config()
    out = [INTRO, "\n## Top level\n\n", _rows(Config, defaults)]
    for name, (cls, doc) in sections_of(Config).items():
        out += [f"\n## `[{name}]`\n\n{_plain(doc)}\n\n", _rows(cls, getattr(defaults, name))]
    out += [
        f"\n## `[[schedule]]`\n\n{_plain(ScheduleConfig.__doc__)} `name`, `type` and `cron` "
        "are required; names must be unique.\n\n",
        _rows(ScheduleConfig, None),
        '\n```toml\n[[schedule]]\nname = "cleanup-old-data"\ntype = "cleanup:old-data"\n'
        'cron = "15 3 * * *"\n```\n',
    ]
    out += [
        f'\n## `[types."<job type>"]`\n\n{_plain(TypeConfig.__doc__)}\n\n',
        _rows(TypeConfig, TypeConfig()),
        '\n```toml\n[types."report:generate"]\nconcurrency = 2\nrate = "10/min"\n```\n',
    ]
    out += [
        f'\n## `[queues."<name>"]`\n\n{_plain(QueueConfig.__doc__)}\n\n',
        _rows(QueueConfig, QueueConfig()),
        "\n```toml\n[queues.emails]\nworkers = 2\n\n[queues.reports]\nweight = 1\n```\n",
    ]
    return "".join(out)


def _rows(cls: type, defaults: Any) -> str:
    lines = ["| Key | Type | Default | Accepts | Description |", "|---|---|---|---|---|"]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, spec in keys_of(cls).items():
        if defaults is None:
            f = fields[key]
            has = (
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            )
            default = (
                f.default
                if f.default is not dataclasses.MISSING
                else (f.default_factory() if has else None)
            )
            shown = f"`{_value(default)}`" if has else "required"
        else:
            value = getattr(defaults, key)
            shown = (
                "unset"
                if value is None
                else f"`{_value(list(value) if isinstance(value, tuple) else value)}`"
            )
        lines.append(
            " | ".join(
                ["", f"`{key}`", spec.type_name, shown, _cell(spec.expected), _cell(spec.doc), ""]
            ).strip()
        )
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")

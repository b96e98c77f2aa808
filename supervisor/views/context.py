"""What every ops command gets: the config path, output mode and streams, a clock, and lazy
access to the validated config and the database.

A command is ``fn(ctx, args) -> exit code``. It raises ``ConfigError`` (exit 3) or
``StoreError`` (exit 5) to the dispatcher, or returns ``ctx.fail(...)`` with a
message that says what to do.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from shared.settings import config as config_mod
from shared.runtime.clock import SystemClock
from shared.settings.config import Config
from shared.engines.contract import EngineStore
from shared.engines import open_store


@dataclass
class Ctx:
    config_path: str
    json: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    clock: Any = field(default_factory=SystemClock)
    _config: Config | None = None

    @property
    def config(self) -> Config:
        """The validated config file (raises ConfigError naming the file and the key)."""
        if self._config is None:
            self._config = config_mod.load(self.config_path)
        return self._config

    def store(self) -> EngineStore:
        """A new connection to the config's database (the caller closes it)."""
        return open_store(self.config)

    def emit(self, data: Any, text: str | None = None) -> None:
        """Print ``data`` as JSON with ``--json``, else ``text`` (or nothing when None)."""
        if self.json:
            print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=self.out)
        elif text is not None:
            print(text, file=self.out)

    def fail(self, message: str, code: int) -> int:
        """Print ``jobq: message`` on stderr and return ``code``."""
        print(f"jobq: {message}", file=self.err)
        return int(code)

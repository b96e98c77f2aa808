"""``python -m supervisor.gendocs [--check]``: regenerate the files derived from the config's
key table: the shipped ``jobq.toml`` and ``docs/configuration.md`` (at the repository top, beside
the ``supervisor`` package). ``--check`` writes nothing and exits 1 naming each stale file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from .configdoc import reference_markdown
from .template import shipped_toml

ROOT = Path(__file__).resolve().parents[2]
GENERATED: dict[str, Callable[[], str]] = {
    "jobq.toml": shipped_toml,
    "docs/configuration.md": reference_markdown,
}


def stale(root: Path = ROOT) -> list[str]:
    """The generated files under ``root`` whose text differs from what the key table gives."""
    out = []
    for rel, make in GENERATED.items():
        path = root / rel
        if not path.exists() or path.read_text(encoding="utf-8") != make():
            out.append(rel)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m supervisor.gendocs", description=__doc__)
    p.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale")
    args = p.parse_args(argv)
    if args.check:
        bad = stale()
        for rel in bad:
            print(f"{rel} is stale: run python -m supervisor.gendocs", file=sys.stderr)
        return 1 if bad else 0
    for rel, make in GENERATED.items():
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make(), encoding="utf-8")
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

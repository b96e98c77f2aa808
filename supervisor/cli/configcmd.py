"""``config show [--effective]``, ``config init [--force]``, ``config set KEY VALUE``,
``config check``.

``config set`` validates the whole file as it would be after the edit (``shared.settings.config``)
and writes it atomically, keeping the operator's comments and layout
(:mod:`supervisor.cli.tomledit`). A value the config refuses leaves the file as it was; so does a
``handlers`` list naming a module that fails to import here (from the current directory, as ``jobq
run`` would). A running supervisor notices the new file by itself (``config_poll_interval``).

``config check`` validates the file and imports its handler modules: exit 0, 3 (invalid file)
or 4 (a handler module failed to import: what ``jobq run`` would exit with).
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from shared.settings import config as config_mod
from shared import engines
from shared.engines import location as database_mod
from shared.settings.config import SCHEMA, ConfigError
from shared.model.exitcodes import ExitCode
from shared.runtime.files import read_as_written, write_atomic
from shared.execution.handlers import HandlerImportError, load_registry
from shared.model.keys import task_key_error

from supervisor.views.context import Ctx

from .configdoc import reference_markdown
from .template import default_toml
from .tomledit import EditError, parse_value, set_key, toml_value


def cmd_config(ctx: Ctx, args: argparse.Namespace) -> int:
    return {"show": _show, "init": _init, "set": _set, "check": _check, "reference": _reference}[
        args.config_command
    ](ctx, args)


def _check(ctx: Ctx, args: argparse.Namespace) -> int:
    """Validate the file (ConfigError: exit 3) and import its handler modules (exit 4 if one fails)."""
    cfg = ctx.config
    try:
        registry = load_registry(cfg.handlers, cfg.path)
    except HandlerImportError as exc:
        code = ctx.fail(exc.summary, ExitCode.BOOT_FAILED)  # the one line first, then the traceback
        print(exc.traceback, end="", file=ctx.err)
        return code
    types = registry.types()
    wrong = key_path_errors(cfg, registry)
    if wrong:
        return ctx.fail(f"{cfg.path}: {wrong[0]}", ExitCode.CONFIG_INVALID)
    how = engines.describe(cfg)
    ctx.emit(
        {"path": cfg.path, "handlers": list(cfg.handlers), "types": types, "connection": how},
        f"{cfg.path}: valid; handler modules {', '.join(cfg.handlers) or '(none)'} import and serve "
        f"{len(types)} job types: {', '.join(types)}"
        + (f"\ndatabase {database_mod.redacted(cfg.database)}: {how}" if how else ""),
    )
    return ExitCode.OK


def key_path_errors(cfg: Any, registry: Any) -> list[str]:
    """Why each ``[types.X] key`` of a task type cannot find its key (it names no parameter
    of the task), in type order: the file alone cannot tell, the task's signature can."""
    out = []
    for jtype, settings in sorted(cfg.types.items()):
        spec = registry.get(jtype)
        if settings.key is not None and spec is not None and spec.params is not None:
            why = task_key_error(jtype, settings.key, spec.params)
            if why is not None:
                out.append(why)
    return out


def _reference(ctx: Ctx, args: argparse.Namespace) -> int:
    """Every key: type, default, accepted values, meaning (``docs/configuration.md``)."""
    if ctx.json:
        ctx.emit(
            {
                (f"{s}.{k}" if s else k): {
                    "type": spec.type_name,
                    "expected": spec.expected,
                    "doc": spec.doc,
                }
                for s, keys in SCHEMA.items()
                for k, spec in keys.items()
            }
        )
    else:
        print(reference_markdown(), end="", file=ctx.out)
    return ExitCode.OK


def _show(ctx: Ctx, args: argparse.Namespace) -> int:
    path = Path(ctx.config_path)
    if args.effective:
        cfg = ctx.config
        data = cfg.to_dict()
        data["database"] = database_mod.redacted(cfg.database)  # a secret is for the engine only
        ctx.emit(
            {"path": cfg.path, "config": data},
            f"# effective configuration: {cfg.path} with every default filled in\n"
            + tomli_w.dumps(data),
        )
        return ExitCode.OK
    try:
        text = path.read_text(encoding="utf-8-sig")  # (a byte-order mark is not shown)
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: config file not found (create one with: jobq config init --config {path})"
        )
    _ = ctx.config  # validate: an invalid file is reported with exit 3, not printed as if fine
    text = database_mod.scrub(text, ctx.config.database)  # the file as written, less its password
    if ctx.json:
        ctx.emit({"path": str(path.resolve()), "config": tomllib.loads(text)})
    else:
        print(text, end="" if text.endswith("\n") else "\n", file=ctx.out)
    return ExitCode.OK


def _init(ctx: Ctx, args: argparse.Namespace) -> int:
    path = Path(ctx.config_path)
    if path.exists() and not args.force:
        return ctx.fail(
            f"config init: {path} already exists (--force overwrites it)", ExitCode.USAGE
        )
    text = default_toml()
    write_atomic(path, text)
    config_mod.load(path)  # what we wrote must load
    ctx.emit(
        {"path": str(path.resolve())}, f"wrote {path} (every key at its default; set handlers next)"
    )
    return ExitCode.OK


def _set(ctx: Ctx, args: argparse.Namespace) -> int:
    path = Path(ctx.config_path)
    section, key = _split(args.key)
    if section not in SCHEMA or key not in SCHEMA[section]:
        return _unknown_key(ctx, args.key)
    text, bom, eol = _read(path)
    value = parse_value(args.value)
    try:
        new_text = _edited(path, text, section, key, value, eol)
    except HandlerImportError as exc:
        return ctx.fail(
            f"config set {args.key}: refused: {exc.summary}; {path} is unchanged",
            ExitCode.CONFIG_INVALID,
        )
    except EditError as exc:
        return ctx.fail(
            f"config set {args.key}: {exc}; {path} is unchanged", ExitCode.CONFIG_INVALID
        )
    except ConfigError as exc:
        return ctx.fail(
            f"config set {args.key}: refused: {exc}; {path} is unchanged", ExitCode.CONFIG_INVALID
        )
    write_atomic(path, bom + new_text)
    ctx.emit(
        {"path": str(path.resolve()), "key": args.key, "value": value},
        f"{path}: {args.key} = {toml_value(value)} (a running supervisor applies it within "
        f"config_poll_interval, or now with: jobq reload)",
    )
    return ExitCode.OK


def _unknown_key(ctx: Ctx, dotted: str) -> int:
    """``config set``'s refusal of a key the schema does not have, listing those it has."""
    known = ", ".join(sorted(f"{s}.{k}" if s else k for s, keys in SCHEMA.items() for k in keys))
    return ctx.fail(f"config set: unknown key '{dotted}' (known: {known})", ExitCode.CONFIG_INVALID)


def _read(path: Path) -> tuple[str, str, str]:
    """The config file's text, byte-order mark and line ending (it is written back in the
    file's own form); ConfigError if it is missing or not text."""
    try:
        return read_as_written(path)
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: config file not found (create one with: jobq config init --config {path})"
        )
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _edited(path: Path, text: str, section: str, key: str, value: Any, eol: str) -> str:
    """``text`` with ``section.key`` set to ``value``, once the whole config it makes loads;
    EditError, ConfigError or HandlerImportError (nothing is written) if it does not."""
    new_text = set_key(text, section, key, value, eol)
    cfg = config_mod.from_dict(
        tomllib.loads(new_text), source=str(path), base_dir=str(path.resolve().parent)
    )
    if key == "handlers" and not section:
        load_registry(
            cfg.handlers, str(path.resolve())
        )  # a typo in a module name is refused now, not at start-up
    return new_text


def _split(dotted: str) -> tuple[str, str]:
    section, _, key = dotted.rpartition(".")
    return section, key

"""``jobq copy --from DB --to DB``: copy (or move, with ``--delete``) jobs between databases of any
engines, idempotent by job id and resumable (docs/scaling-out.md has the move step by step).

The source is read in id order, ``--chunk`` jobs at a time; each chunk is imported into the
target in one transaction, with the attempt history and the workflow edges (``job_deps``: each
parent waited for, its position, whether it is done) of the jobs it inserts. Every column is kept
(ids, times, attempts, results). A job whose id is in the target already is never overwritten,
so running the same command again copies only what is new: that is how an interrupted copy
resumes, and how a second copy after the switch catches the stragglers. Each column is written
the way the target engine stores it (PostgreSQL keeps a NUL in an error visible as ``\\x00``,
and escapes one in a payload or result as JSON does); a job the target cannot store at all is
named (``rejected``) and the rest copied.
Pending jobs copied wake the target's idle workers, as an enqueue does.

Workflows travel whole or in parts, in any order: a ``waiting`` job is copied with its edges,
and the target ends where the source would have. A parent that ends in the target (or arrives
ended from the source, say one that was running there at the first copy) settles the waiting
children there by the schema's own trigger, as the end of a parent always does: released when
their last parent completed, or cancelled as their ``after_failure`` says.

Running jobs are not copied unless ``--status running`` asks: the copy would run again in the
target while its worker still runs it in the source. With ``--delete`` the jobs copied are then
deleted from the source, each only if unchanged since it was read (a job that started meanwhile
stays where it runs). A parent deleted so is moved, not cancelled: the waiting children it leaves
in the source for a later chunk or run stay waiting, to be moved in turn.

On a terminal a progress line shows the jobs read, the rate and the time left (``.progress``);
piped or with ``--json``, only the result is written.

Exit codes: 0 done; 2 bad arguments; 3 invalid config; 5 a database cannot be opened or used
(one line naming it, password hidden); 130 interrupted (run the same command again to resume).
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Sequence

from shared.engines import location as database_mod
from shared.settings.config import Config
from shared.engines.contract import Imported, EngineStore
from shared.engines import database_file, open_store
from shared.model.errors import StoreError
from shared.model.exitcodes import ExitCode
from shared.model.job import STATUSES
from supervisor.views.context import Ctx

from .progress import Progress, wanted

DEFAULT_STATUSES = tuple(s for s in STATUSES if s != "running")  # see above
CHUNK = 500
SHOW_IDS = 10  # ids named per kind of skipped job; the rest are counted


def add_parser(sub: argparse._SubParsersAction, common: Any, wrap: Any) -> None:
    help = "copy jobs to another database (e.g. SQLite to PostgreSQL), idempotent and resumable"
    p = sub.add_parser("copy", help=help, description=help + "; see docs/scaling-out.md")
    common(p, False)
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="DB",
        help="source database, as in jobq.toml: a path, sqlite:///abs/path.db or postgresql://...",
    )
    p.add_argument(
        "--to", dest="target", required=True, metavar="DB", help="target database (created if new)"
    )
    p.add_argument(
        "--status",
        action="append",
        default=None,
        metavar="S[,S...]",
        help=f"statuses to copy ({', '.join(STATUSES)} or all; repeatable; "
        f"default {','.join(DEFAULT_STATUSES)})",
    )
    p.add_argument(
        "--delete",
        action="store_true",
        help="move: delete each copied job from the source if it did not change meanwhile",
    )
    _span_arguments(p)
    p.set_defaults(func=wrap(cmd_copy))


def _span_arguments(p: argparse.ArgumentParser) -> None:
    """Where in the source the copy starts, how many jobs it reads, and how many each
    transaction of the target writes."""
    p.add_argument(
        "--after", default="", metavar="ID", help="start after this job id (default: the first)"
    )
    p.add_argument(
        "--limit", type=int, default=None, metavar="N", help="read at most N jobs of the source"
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=CHUNK,
        metavar="N",
        help=f"jobs per transaction of the target (default {CHUNK})",
    )


def parse_statuses(values: Sequence[str] | None) -> tuple[str, ...]:
    """The statuses named by ``--status`` (comma-separated, repeatable, ``all``). ValueError
    naming an unknown one."""
    if not values:
        return DEFAULT_STATUSES
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    if "all" in names:
        return STATUSES
    unknown = [n for n in names if n not in STATUSES]
    if unknown or not names:
        raise ValueError(
            f"copy: unknown --status {', '.join(unknown) or '(empty)'} "
            f"(expected {', '.join(STATUSES)} or all)"
        )
    return tuple(dict.fromkeys(names))


def cmd_copy(ctx: Ctx, args: argparse.Namespace) -> int:
    try:
        statuses = parse_statuses(args.status)
    except ValueError as exc:
        return ctx.fail(str(exc), ExitCode.USAGE)
    if args.chunk < 1 or (args.limit is not None and args.limit < 0):
        return ctx.fail("copy: --chunk must be >= 1 and --limit >= 0", ExitCode.USAGE)
    base = ctx.config if args.config is not None or os.path.exists(ctx.config_path) else Config()
    cfgs = {}
    for flag, value in (("--from", args.source), ("--to", args.target)):
        try:
            cfgs[flag] = base.replace(database=database_mod.resolve(value, os.getcwd()))
        except ValueError as exc:
            return ctx.fail(
                f"copy {flag} {database_mod.redacted(value)}: {database_mod.scrub(str(exc), value)}",
                ExitCode.DATABASE_UNAVAILABLE,
            )
    if cfgs["--from"].database == cfgs["--to"].database:
        return ctx.fail(
            f"copy: --from and --to name the same database ({database_mod.redacted(args.source)})",
            ExitCode.USAGE,
        )
    source_file = database_file(cfgs["--from"])
    if source_file is not None and not os.path.exists(source_file):
        return ctx.fail(
            f"copy --from {database_mod.redacted(args.source)}: no such database file",
            ExitCode.DATABASE_UNAVAILABLE,
        )
    with _open(ctx, "--from", args.source, cfgs["--from"], migrate=False) as src:
        if isinstance(src, int):
            return src
        with _open(ctx, "--to", args.target, cfgs["--to"], migrate=True) as dst:
            if isinstance(dst, int):
                return dst
            return Copy(ctx, args, statuses, src, dst).run()


class _open:
    """``with`` a store on one side (``flag``), or the exit code of a failure to open it, with the
    message printed. Errors while copying are named with their side too (see :class:`Copy`)."""

    def __init__(self, ctx: Ctx, flag: str, value: str, cfg: Config, *, migrate: bool) -> None:
        self.ctx, self.flag, self.value, self.cfg, self.migrate = ctx, flag, value, cfg, migrate
        self.store: EngineStore | None = None

    def __enter__(self) -> EngineStore | int:
        try:
            self.store = open_store(self.cfg, migrate=self.migrate)
        except StoreError as exc:
            return unavailable(self.ctx, self.flag, self.value, exc)
        return self.store

    def __exit__(self, *exc: object) -> None:
        if self.store is not None:
            self.store.close()


def unavailable(ctx: Ctx, flag: str, value: str, exc: StoreError) -> int:
    """One line: which side, which database (password hidden), what went wrong."""
    text = " ".join(database_mod.scrub(str(exc), value).split())
    return ctx.fail(
        f"copy {flag} {database_mod.redacted(value)}: {text}", ExitCode.DATABASE_UNAVAILABLE
    )


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


class Copy:
    """One run of the copy: chunk after chunk until the source has no more (or ``--limit``)."""

    def __init__(
        self,
        ctx: Ctx,
        args: argparse.Namespace,
        statuses: Sequence[str],
        src: EngineStore,
        dst: EngineStore,
    ) -> None:
        self.ctx, self.args, self.statuses, self.src, self.dst = ctx, args, statuses, src, dst
        self.after = args.after
        self.read = self.attempts = 0
        self.total = Imported()
        self.deleted: list[str] = []

    def run(self) -> int:
        total = self.expected() if wanted(self.ctx) else None
        with Progress(self.ctx, "jobq copy", "jobs read", total) as p:
            return self.steps(p)

    def steps(self, progress: Progress) -> int:
        try:
            while self.args.limit is None or self.read < self.args.limit:
                want = (
                    self.args.chunk
                    if self.args.limit is None
                    else min(self.args.chunk, self.args.limit - self.read)
                )
                if not self.chunk(want):
                    break
                copied = len(self.total.inserted)
                progress.update(self.read, f"{copied} copied, last id {self.after}")
            progress.close()
        except StoreError as exc:
            progress.close()
            self.summary(done=False)
            flag, value = self.side(exc)
            return unavailable(self.ctx, flag, value, exc)
        except KeyboardInterrupt:
            progress.close()
            self.summary(done=False)
            return self.ctx.fail(
                f"copy interrupted after job {self.after or '(none)'}: run the same "
                "command again to resume (copied jobs are skipped)",
                130,
            )
        self.summary(done=True)
        return ExitCode.OK

    def chunk(self, want: int) -> bool:
        """Copy the next ``want`` jobs of the source; False when there were none."""
        rows = self.src.export_jobs(self.after, want, self.statuses)
        if not rows:
            return False
        ids = [r["id"] for r in rows]
        history = self.src.export_attempts(ids)
        got = self.dst.import_jobs(rows, history, self.src.export_edges(ids))
        new = set(got.inserted)
        self.attempts += sum(1 for a in history if a["job_id"] in new)
        self.total.edges += got.edges
        if self.args.delete:
            same = new | set(got.present)
            self.deleted += self.src.delete_copied([r for r in rows if r["id"] in same])
        for name in ("inserted", "present", "differing", "key_taken"):
            getattr(self.total, name).extend(getattr(got, name))
        self.total.rejected.update(got.rejected)
        self.read += len(rows)
        self.after = rows[-1]["id"]
        return True

    def side(self, exc: StoreError) -> tuple[str, str]:
        """Which side an error came from (by the location it names), for its message."""
        if exc.database and exc.database == self.dst.location:
            return "--to", self.args.target
        if exc.database and exc.database == self.src.location:
            return "--from", self.args.source
        return "--from/--to", f"{self.args.source} -> {self.args.target}"

    def expected(self) -> int | None:
        """How many jobs the copy will read (the source's counts of its statuses, within
        ``--limit``), for the progress line; None when unknown (``--after``)."""
        if self.args.after:
            return None
        counts = self.src.counts()
        n = sum(counts.get(s, 0) for s in self.statuses)
        return n if self.args.limit is None else min(n, self.args.limit)

    def summary(self, *, done: bool) -> None:
        t = self.total
        data = {
            "done": done,
            "read": self.read,
            "copied": len(t.inserted),
            "attempts": self.attempts,
            "edges": t.edges,
            "already_there": len(t.present),
            "differing": t.differing,
            "key_taken": t.key_taken,
            "deleted": len(self.deleted),
            "last_id": self.after or None,
            "statuses": list(self.statuses),
            "rejected": t.rejected,
        }
        if not self.ctx.json:
            self._explain_skips()
        skipped = len(t.present) + len(t.differing) + len(t.key_taken)
        edges = f", {_n(t.edges, 'workflow edge')}" if t.edges else ""
        text = (
            f"copied {_n(len(t.inserted), 'job')} ({_n(self.attempts, 'attempt')}{edges}) to "
            f"{database_mod.redacted(self.args.target)}, skipped {skipped} already there"
        )
        if t.differing or t.key_taken:
            text += f" ({len(t.differing)} in another state there, {len(t.key_taken)} with a key taken there)"
        if t.rejected:
            text += f"; {_n(len(t.rejected), 'job')} the target cannot store"
        if self.args.delete:
            text += f"; deleted {len(self.deleted)} from the source"
        if not done:
            text += f"; stopped after job {self.after or '(none)'}"
        self.ctx.emit(data, text)

    def _explain_skips(self) -> None:
        for ids, why in (
            (
                self.total.differing,
                "is in the target already, in another state: the target's "
                "row is kept (the job changed in the source after an earlier copy)",
            ),
            (
                self.total.key_taken,
                "was not copied: another job in the target holds its idempotency key",
            ),
        ):
            for i in ids[:SHOW_IDS]:
                print(f"jobq copy: job {i} {why}", file=self.ctx.err)
            if len(ids) > SHOW_IDS:
                print(f"jobq copy: ... and {len(ids) - SHOW_IDS} more like that", file=self.ctx.err)
        for i, why in list(self.total.rejected.items())[:SHOW_IDS]:
            print(
                f"jobq copy: job {i} was not copied: the target cannot store it: {why}",
                file=self.ctx.err,
            )
        if len(self.total.rejected) > SHOW_IDS:
            print(
                f"jobq copy: ... and {len(self.total.rejected) - SHOW_IDS} more like that",
                file=self.ctx.err,
            )

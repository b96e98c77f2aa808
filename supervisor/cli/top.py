"""``top``: a full-screen live view of the queue, redrawn every second.

Built on the standard library's ``curses``: it is on every Unix Python, speaks terminfo (so it
draws right over SSH and in tmux/screen), restores the terminal on exit, and this view needs
nothing more (text, reverse video, a resize event). q, Q or Esc quits; so does Ctrl-C.

Sparklines come from following ``job_attempts``: at each refresh the attempts that ended since
the last one are aggregated in SQL (count, mean wait, mean run time); the rest is the same
snapshot ``status`` prints (without its percentiles).
"""

from __future__ import annotations

import argparse
import curses
import locale
import sys
from collections import deque
from typing import Any

from shared import ops
from shared.model.exitcodes import ExitCode
from shared.engines.contract import OpsStore
from supervisor.views import render
from shared.ops import stats
from supervisor.views.context import Ctx
from supervisor.views.snapshot import collect

HISTORY = 240  # refreshes kept for the sparklines
FAILURES = 8  # recent failures shown
QUIT_KEYS = {ord("q"), ord("Q"), 27}


def cmd_top(ctx: Ctx, args: argparse.Namespace) -> int:
    if args.interval <= 0:
        return ctx.fail(f"top: --interval must be > 0, got {args.interval:g}", ExitCode.USAGE)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return ctx.fail(
            "top needs a terminal; for scripts use `jobq status --json` (or --watch)",
            ExitCode.USAGE,
        )
    locale.setlocale(locale.LC_ALL, "")
    with ctx.store() as store:
        view = TopView(
            store,
            ctx.clock,
            args.interval,
            ascii_only="utf" not in locale.getpreferredencoding().lower(),
            config=ctx.config,
        )
        try:
            curses.wrapper(view.run)
        except KeyboardInterrupt:
            pass
    return ExitCode.OK


class TopView:
    """The view's state (sparkline history) and its draw loop."""

    def __init__(
        self,
        store: OpsStore,
        clock: Any,
        interval: float,
        ascii_only: bool = False,
        config: Any = None,
    ) -> None:
        """``config``: the one the command read (its pools say which queues no worker serves)."""
        self.store = store
        self.config = config
        self.clock = clock
        self.interval = interval
        self.ascii_only = ascii_only
        self.seq = ops.last_attempt_seq(store)
        self.last_poll = clock.monotonic()
        self.rate: deque[float | None] = deque(maxlen=HISTORY)
        self.wait: deque[float | None] = deque(maxlen=HISTORY)
        self.run_t: deque[float | None] = deque(maxlen=HISTORY)
        self.snap: dict[str, Any] = {}
        self.failures: list[dict[str, Any]] = []
        self.frames = 0

    def run(self, scr: Any) -> None:
        try:
            curses.curs_set(0)
        except curses.error:
            pass
        next_tick = 0.0
        while True:
            now_m = self.clock.monotonic()
            if now_m >= next_tick:
                self.poll()
                self.draw(scr)
                next_tick = now_m + self.interval
            scr.timeout(max(int((next_tick - self.clock.monotonic()) * 1000), 10))
            key = scr.getch()
            if key in QUIT_KEYS:
                return
            if key == curses.KEY_RESIZE:
                self.draw(scr)

    def poll(self) -> None:
        """Read a new snapshot and extend the sparklines with the attempts ended since the last."""
        now_m = self.clock.monotonic()
        last = ops.last_attempt_seq(self.store)
        rows = ops.attempt_aggregates(self.store, self.seq, last, ()) if last > self.seq else []
        self.seq = last
        n = sum(r["n"] for r in rows)
        self.rate.append(n / max(now_m - self.last_poll, 1e-6))
        self.wait.append(stats.mean_of(rows, "wait"))
        self.run_t.append(stats.mean_of(rows, "run"))
        self.last_poll = now_m
        self.snap = collect(self.store, self.clock.now(), detail=False, config=self.config)
        self.failures = ops.recent_failures(self.store, FAILURES)

    def draw(self, scr: Any) -> None:
        self.frames += 1
        scr.erase()
        h, w = scr.getmaxyx()
        y = 0
        for text, attr in self.lines(w):
            if y >= h:
                break
            try:
                scr.addnstr(y, 0, text, max(w - 1, 0), attr)
            except curses.error:
                pass
            y += 1
        scr.refresh()

    def lines(self, width: int) -> list[tuple[str, int]]:
        """The screen as (text, attribute) lines, top to bottom."""
        bold, rev = curses.A_BOLD, curses.A_REVERSE
        out = [(self._title(), rev), ("", 0)]
        spark = max(width - 34, 10)
        for label, series, fmt in (
            ("jobs/s", self.rate, lambda v: f"{v:.1f}/s"),
            ("wait (mean)", self.wait, render.duration),
            ("run (mean)", self.run_t, render.duration),
        ):
            recent = list(series)[-spark:]
            now = recent[-1] if recent else None
            shown = fmt(now) if now is not None else "-"
            line = f"{label:<12} {render.sparkline(recent, self.ascii_only):>{spark}} {shown:>10}"
            out.append((line, 0))
        out += (
            [("", 0)]
            + self._queue(bold)
            + [("", 0)]
            + self._workers(bold)
            + [("", 0)]
            + self._failures(bold)
        )
        return out

    def _title(self) -> str:
        s = self.snap
        live = [x for x in s["supervisors"] if x["alive"]]
        sup = (
            f"supervisor pid {live[0]['pid']} up {render.duration(live[0]['up_s'])}"
            if live
            else "supervisor NOT RUNNING"
        )
        state = "PAUSED" if s["paused"] else "active"
        gauges = "".join(f"{render.gauge_text(g)}  " for g in s.get("gauges", ()))
        return f" jobq top  {s['database']}  {s['now'][11:19]}Z  {sup}  queue {state}  {gauges}(q quits)"

    def _queue(self, bold: int) -> list[tuple[str, int]]:
        s = self.snap
        j = s["jobs"]
        oldest = s["oldest_due"]
        head = (
            f"waiting {j['waiting']}  pending {j['pending']} ({j['scheduled']} scheduled)  running {j['running']}  "
            f"completed {j['completed']}  failed {j['failed']}  cancelled {j['cancelled']}  "
            f"oldest due {render.duration(oldest['age_s']) if oldest else '-'}"
        )
        cols = ["pending", "scheduled", "running", "completed", "failed"]
        rows = [[t] + [c.get(k, 0) for k in cols] for t, c in sorted(s["by_type"].items())]
        body = render.table(["QUEUE BY TYPE"] + [c.upper() for c in cols], rows).splitlines()
        named = render.queues_text(
            s.get("queues") or []
        ).splitlines()  # named queues, when there are
        return (
            [(head, 0), (body[0], bold)]
            + [(ln, 0) for ln in body[1:]]
            + ([("", 0), (named[0], bold)] + [(ln, 0) for ln in named[1:]] if named else [])
        )

    def _workers(self, bold: int) -> list[tuple[str, int]]:
        text = render.workers_text(self.snap["workers"]).splitlines()
        return [(text[0], bold)] + [(ln, 0) for ln in text[1:]]

    def _failures(self, bold: int) -> list[tuple[str, int]]:
        if not self.failures:
            return [("RECENT FAILURES  none", bold)]
        rows = [
            [
                f["completed_at"][11:19],
                f["id"],
                f["type"],
                f["attempts"],
                render.error_line(f["error"], 70),
            ]
            for f in self.failures
        ]
        body = render.table(
            ["RECENT FAILURES", "ID", "TYPE", "ATTEMPTS", "ERROR"], rows
        ).splitlines()
        return [(body[0], bold)] + [(ln, 0) for ln in body[1:]]

"""Progress a person can follow, in a terminal and in a CI log: one line per test file as it
ends, instead of a dot per test (a failure still prints its letter at once, and its report at
the end as always).

    [ 35%] tests/behaviour/test_api.py: 42 passed in 12.3 s  (5:12 so far)

It works alike with and without pytest-xdist (the suite runs on two processes by default:
pyproject.toml's addopts), counting each test once it has torn down. Loaded by the root
conftest.py; ``-v`` gives pytest's own line per test instead, and ``-p no:tests.progress``
turns it off.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import pytest

WORST = ("failed", "error", "skipped", "passed")  # a test's outcome: the worst of its phases


class FileProgress:
    """Counts each file's finished tests and prints the file's line when the last one ends."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.start = time.monotonic()
        self.total: Counter[str] = Counter()  # collected tests per file
        self.first: dict[str, float] = {}  # when a file's first test started
        self.outcome: dict[str, str] = {}  # nodeid -> its worst outcome so far
        self.done: dict[str, Counter[str]] = defaultdict(Counter)
        self.finished = 0
        self.letters = False  # a failure's letter is on the line

    @property
    def reporter(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def collected(self, nodeids: list[str]) -> None:
        if not self.total:  # each xdist worker reports the same collection: count it once
            self.total.update(nodeid.split("::", 1)[0] for nodeid in nodeids)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's, on the controller
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected(ids)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Any:
        if hasattr(report, "wasxfail"):  # xfail and xpass keep pytest's own letters and words
            return None
        if report.passed and report.when == "call":
            return "passed", "", "PASSED"  # no dot: the file's line says it
        if report.skipped:
            return "skipped", "", "SKIPPED"
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.first.setdefault(path, time.monotonic())
        kind = "error" if report.failed and report.when != "call" else report.outcome
        old = self.outcome.get(report.nodeid, "passed")
        self.outcome[report.nodeid] = min(old, kind, key=WORST.index)
        self.letters = self.letters or report.failed or hasattr(report, "wasxfail")
        if report.when != "teardown":
            return
        self.done[path][self.outcome.pop(report.nodeid)] += 1
        self.finished += 1
        if sum(self.done[path].values()) == self.total.get(path, 0):
            self.line(path)

    def line(self, path: str) -> None:
        counts = ", ".join(
            f"{n} {kind}"
            for kind, n in sorted(self.done[path].items(), key=lambda kv: WORST.index(kv[0]))
        )
        took = time.monotonic() - self.first[path]
        so_far = int(time.monotonic() - self.start)
        share = 100 * self.finished // max(sum(self.total.values()), 1)
        if self.letters:  # end the line of letters first
            self.reporter.write("\n")
            self.letters = False
        self.reporter.write_line(
            f"[{share:3d}%] {path}: {counts} in {took:.1f} s  "
            f"({so_far // 60}:{so_far % 60:02d} so far)"
        )


@pytest.hookimpl(trylast=True)  # after the terminal reporter is there
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: its controller prints the progress
        return
    if config.get_verbosity() == 0 and config.pluginmanager.get_plugin("terminalreporter"):
        config.pluginmanager.get_plugin("terminalreporter").showfspath = False  # the line names it
        config.pluginmanager.register(FileProgress(config), "tests.progress.files")

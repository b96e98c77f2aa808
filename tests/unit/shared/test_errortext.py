"""The line that stands for a stored error (shared.model.errortext): the final exception's type and the
first line of its message, from the tracebacks Python writes."""

from __future__ import annotations

import traceback

from shared.model.errortext import cut, headline


class HTTPStatusError(Exception):
    pass


def formatted(fn) -> str:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test formats whatever it raised
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    raise AssertionError("nothing raised")


def _http():
    raise HTTPStatusError(
        "Server error '503 Service Unavailable' for url 'https://x'\n"
        "For more information check: https://developer.mozilla.org/503"
    )


def _chained():
    try:
        _http()
    except HTTPStatusError as exc:
        raise RuntimeError("sending failed\nafter 3 tries") from exc


def _noted():
    exc = ValueError("bad address")
    exc.add_note("while sending to 7 people")
    raise exc


def _group():
    raise ExceptionGroup("2 sends failed", [ValueError("a\nb"), KeyError("c")])


def test_a_traceback_is_its_final_exception_and_the_first_line_of_its_message():
    assert headline(formatted(_http)) == (
        f"{__name__}.HTTPStatusError: Server error '503 Service Unavailable' for url 'https://x'"
    )
    assert headline(formatted(_chained)) == "RuntimeError: sending failed"
    assert headline(formatted(_noted)) == "ValueError: bad address"
    assert headline(formatted(_group)) == "ExceptionGroup: 2 sends failed (2 sub-exceptions)"
    assert headline(formatted(lambda: compile("x = (", "f.py", "exec"))).startswith("SyntaxError: ")
    assert (
        headline(
            "handler of job 1 called sys.exit('bye'): treated as a failure\n"
            + formatted(lambda: exit("bye"))
        )
        == "SystemExit: bye"
    )


def test_a_tracebacks_end_without_its_header_is_read_from_its_last_frame():
    tail = formatted(_chained)[-300:]
    assert "Traceback" not in tail and headline(tail) == "RuntimeError: sending failed"


def test_other_text_is_its_first_line():
    assert headline("no handler for job type 'x' (job 1); registered types: none") == (
        "no handler for job type 'x' (job 1); registered types: none"
    )
    assert headline("\n  parent job 1 (t) failed\nsecond") == "parent job 1 (t) failed"
    assert headline(None) == headline("") == ""
    assert cut("abcdef", 4) == "abc…" and cut("abc", 4) == "abc"

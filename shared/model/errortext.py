"""The one line that stands for a job's stored error wherever a line is all there is room for
(``jobq jobs``, ``show``'s attempts, ``top``, the dashboard's tables and attempt history, the
``job.retry`` and ``job.failed`` log lines, a trace span's status,
:class:`shared.handles.JobFailed`); the whole text stays stored, in the job and its attempt
history, and is shown where there is room (``jobq show``, the dashboard's job page).

A handler's error is its traceback (``traceback.format_exception``), whose final exception is
written last as ``module.Type: message``, and a message may span lines: httpx's
``HTTPStatusError`` adds ``For more information check: <url>`` under ``Server error '503
Service Unavailable' for url '...'``. The line is the final exception's type and the first line
of its message, not the text's last line. Of an exception chained from others (``raise ... from``,
an exception during handling) it is the last one raised; of an ``ExceptionGroup``, the group's
own line. The end of a traceback without its header (the dashboard's listing reads an error's
last 2,000 characters) is read from its last frame on. Text that is no traceback (``no handler
for job type ...``, ``parent job ... failed``): its first non-blank line.
"""

from __future__ import annotations

_HEADER = "Traceback (most recent call last):"
_GROUP_HEADER = "  + Exception Group Traceback (most recent call last):"
_GROUP_LINE = "  | "
_FRAME = "  File "


def headline(text: str | None) -> str:
    """The final exception's ``Type: first line of its message`` of a stored traceback, else the
    first non-blank line of ``text`` ("" for none), stripped."""
    lines = (text or "").splitlines()
    start = max((i for i, ln in enumerate(lines) if ln in (_HEADER, _GROUP_HEADER)), default=None)
    if start is None:  # a traceback's end: from its last frame
        start = max((i for i, ln in enumerate(lines) if ln.startswith(_FRAME)), default=None)
    if start is not None:
        group = lines[start] == _GROUP_HEADER
        for ln in lines[start + 1 :]:
            if group and ln.startswith(_GROUP_LINE) and ln[len(_GROUP_LINE) :][:1].strip():
                return ln[len(_GROUP_LINE) :].strip()
            if not group and ln[:1].strip():
                return ln.strip()
    return next((ln.strip() for ln in lines if ln.strip()), "")


def cut(text: str, width: int) -> str:
    """``text`` at most ``width`` characters, an ellipsis marking a cut."""
    return text if len(text) <= width else text[: width - 1] + "…"

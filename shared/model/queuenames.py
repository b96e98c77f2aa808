"""Queue names: what a named queue may be called, checked alike at enqueue, in
``jobq.toml`` and on the command line. A leaf module: the config imports it."""

from __future__ import annotations

from typing import Any

from shared.model.bounds import is_unicode
from shared.settings.schema import Key

DEFAULT_QUEUE = "default"  # the queue of a job enqueued without one
MAX_QUEUE_LEN = 100


def queue_name_error(name: Any) -> str | None:
    """Why ``name`` is not a valid queue name, or None: a non-empty string of valid Unicode of
    at most :data:`MAX_QUEUE_LEN` characters, without control characters (NUL among them) or
    commas (``--queues a,b``)."""
    if not isinstance(name, str) or not name:
        return f"a queue name must be a non-empty string, got {name!r}"
    if len(name) > MAX_QUEUE_LEN:
        return f"queue name {name[:40]!r}... is {len(name)} characters, above {MAX_QUEUE_LEN}"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name) or "," in name or name != name.strip():
        return f"queue name {name!r} has a control character, a comma or surrounding blanks"
    if not is_unicode(name):
        return (
            f"queue name {name!r} has a lone surrogate (not valid Unicode), which jobq cannot store"
        )
    return None


def check_queue(name: Any) -> str:
    """``name`` if it is a valid queue name, else ValueError saying why."""
    why = queue_name_error(name)
    if why is not None:
        raise ValueError(why)
    return name


QUEUE_NAME = Key(
    (str,),
    f"a queue name: a non-empty string of at most {MAX_QUEUE_LEN} characters, "
    "no control characters or commas",
    lambda v: queue_name_error(v) is None,
)
QUEUE_LIST = Key(
    (list, tuple), "a list of queue names", lambda v: all(queue_name_error(x) is None for x in v)
)


def key_path_error(path: Any) -> str | None:
    """Why ``path`` is not a ``[types.X] key`` path ("payload.a.b", or a task's parameter
    "customer_id"), or None. A path walks JSON objects by name: a part of digits only would
    step into a list by index, which no path does (a task's ``payload.args.0`` moves when a
    caller passes the argument by keyword: name the parameter instead)."""
    parts = path.split(".") if isinstance(path, str) else []
    if not parts or not all(parts) or parts == ["payload"]:
        return f"expected {KEY_EXPECTED}, got {path!r}"
    index = next((p for p in parts if p.isdigit()), None)
    if index is not None:
        return (
            f"{path!r} steps into a list by index ({index}), but a key path walks JSON objects "
            f'by name: for a task, write its parameter\'s name (key = "customer_id")'
        )
    return None


KEY_EXPECTED = (
    'a dotted path into the payload ("payload.customer_id") or a task\'s parameter name '
    '("customer_id"), walking JSON objects by name, never a list by index ("payload.args.0" '
    "cannot work: a task's arguments are found by parameter name, however they are passed)"
)
KEY_PATH = Key((str,), KEY_EXPECTED, lambda v: key_path_error(v) is None)

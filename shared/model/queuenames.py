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
    """Why ``path`` is not a ``[types.X] key`` path ("payload.a.b"), or None."""
    parts = path.split(".") if isinstance(path, str) else []
    if len(parts) < 2 or parts[0] != "payload" or not all(parts):
        return (
            f'expected a dotted path into the payload such as "payload.customer_id", got {path!r}'
        )
    return None


KEY_PATH = Key(
    (str,),
    'a dotted path into the payload, "payload.customer_id"',
    lambda v: key_path_error(v) is None,
)

"""What every engine's connection class does alike: the closed flag and the context manager
(``shared.engines.contract.Connection``). Opening, reconnecting and errors are each engine's own."""

from __future__ import annotations

from typing import Any, Callable


def set_up(
    conn: Any,
    setup: Callable[[Any], Any],
    driver_errors: tuple[type[BaseException], ...],
    error_for: Callable[[BaseException], BaseException],
) -> Any:
    """``conn`` (just opened) once ``setup(conn)`` ran; if it fails the connection is closed
    first (no half set-up connection is ever kept), a driver error raised as jobq's
    (``error_for(exc)``, the driver's as its cause), anything else as it is."""
    try:
        setup(conn)
    except driver_errors as exc:
        conn.close()
        raise error_for(exc) from exc
    except BaseException:
        conn.close()
        raise
    return conn


class ConnectionBase:
    """Mixin of an engine's connection class, which sets ``_closed`` and defines ``_drop``
    (let go of the live connection, if any)."""

    _closed: bool

    def _drop(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Close the store: its connection is let go and every later call fails (idempotent)."""
        self._closed = True
        self._drop()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

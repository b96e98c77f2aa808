"""Has the application's code changed on disk since the workers' template imported it?

A deploy writes new files and says ``jobq reload`` (SIGHUP). The supervisor imports the handler
modules too (for their types and options), and so knows every module they import: the
application's own are those whose source file lies outside the Python installation, its
site-packages and jobq's own packages (:func:`app_files`). :class:`CodeWatch` remembers their
modification times and sizes at the last import and says which changed (a file removed or added
to what the modules import counts too).

On a change, :func:`reimport` imports the handler modules again in the supervisor (the changed
modules first, each with ``importlib.reload``), so a deploy that no longer imports (a syntax
error, a missing name) is refused before any worker runs it; the arbiter then starts a new
template, and workers roll onto it as they finish the job in hand.
"""

from __future__ import annotations

import importlib
import os
import site
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Iterable

Stamp = tuple[int, int]  # a file's (st_mtime_ns, st_size)


def _outside() -> tuple[str, ...]:
    """Folders whose modules are not the application's: Python's own, site-packages, jobq's."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages()}
    roots.add(site.getusersitepackages())
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        roots.add(sysconfig.get_paths().get(key, ""))
    here = Path(__file__).resolve().parent.parent  # the folder holding jobq's own packages
    roots.update(str(here / pkg) for pkg in ("shared", "supervisor", "worker", "jobq"))
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


def app_files(modules: Iterable[ModuleType]) -> dict[str, str]:
    """``{module name: source file}`` of the application's modules among ``modules`` (each
    file's real path: its folder's and its own links resolved)."""
    outside = _outside()
    folders: dict[str, str] = {}  # a folder's real path, resolved once for all its modules
    found = {}
    for mod in modules:
        path = getattr(mod, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        real = _real(path, folders)
        if not real.startswith(outside):
            found[mod.__name__] = real
    return found


def _real(path: str, folders: dict[str, str]) -> str:
    """``os.path.realpath(path)``, the folder's part looked up in (and added to) ``folders``:
    realpath checks every component of every path, 10 ms for a supervisor's 430 modules, on
    the way from the handlers' import to the first workers' start."""
    folder, name = os.path.split(os.path.abspath(path))
    real_folder = folders.get(folder)
    if real_folder is None:
        real_folder = folders[folder] = os.path.realpath(folder)
    real = os.path.join(real_folder, name)
    return os.path.realpath(real) if os.path.islink(real) else real


def stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class CodeWatch:
    """The application's source files as last imported, and which changed since."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.stamps: dict[str, Stamp | None] = {}

    def seen(self) -> None:
        """The modules were just imported: changes are measured from here."""
        self.files = app_files(list(sys.modules.values()))
        self.stamps = {name: stamp(path) for name, path in self.files.items()}

    def changed(self) -> list[str]:
        """The application's modules whose file changed (or went) since :meth:`seen`, sorted."""
        return sorted(n for n, p in self.files.items() if stamp(p) != self.stamps.get(n))


def reimport(changed: Iterable[str], handlers: Iterable[str]) -> None:
    """Import ``changed`` modules again (``importlib.reload``), then the handler modules (so each
    one's handlers are the new code's). Raises what an import raises."""
    importlib.invalidate_caches()
    for name in [*changed, *handlers]:
        mod = sys.modules.get(name)
        if mod is not None:
            importlib.reload(mod)

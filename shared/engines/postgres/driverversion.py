"""psycopg's version, told to it before its import so that the import does not look it up.

``psycopg/version.py`` and ``psycopg_binary/version.py`` each read their distribution's
version through ``importlib.metadata`` when psycopg is imported: that module's own imports
(email, zipfile, csv, ...) and a search of ``sys.path``, ~10 ms of the 70-110 ms psycopg takes
to import, on the way from a supervisor's launch to its first job (its template and every
worker need the driver). The same version is the name of the distribution's
``NAME-VERSION.dist-info`` folder beside the package, one directory listing away:
:func:`install` reads it there and registers the two ``version`` modules (holding only
``__version__``, as the originals do) in ``sys.modules``, where psycopg's import finds them.

Anything unusual (psycopg imported already, not installed, no such folder or more than one, a
package that is not a plain folder) leaves psycopg to read its version its own way.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

PACKAGES = ("psycopg", "psycopg_binary")  # import names; their dist-info folders use the same


def install() -> list[str]:
    """Register ``PKG.version`` for each of :data:`PACKAGES` whose version the dist-info folder
    beside it names; the modules registered (none where psycopg was imported already)."""
    if "psycopg" in sys.modules:
        return []
    done = []
    for package in PACKAGES:
        name = f"{package}.version"
        version = _dist_version(package)
        if version is None or name in sys.modules:
            continue
        module = types.ModuleType(name, f"{package} distribution version (from its dist-info).")
        module.__version__ = version  # type: ignore[attr-defined]
        sys.modules[name] = module
        done.append(name)
    return done


def _dist_version(package: str) -> str | None:
    """The version in the one ``PACKAGE-VERSION.dist-info`` beside ``package``, or None."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if len(places) != 1:
        return None
    folder = os.path.dirname(places[0])
    prefix, suffix = f"{package}-", ".dist-info"
    try:
        found = [
            n[len(prefix) : -len(suffix)]
            for n in os.listdir(folder)
            if n.startswith(prefix) and n.endswith(suffix)
        ]
    except OSError:
        return None
    return found[0] if len(found) == 1 and "-" not in found[0] else None

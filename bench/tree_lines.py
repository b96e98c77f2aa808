"""The runtime tree's shape at two commits, side by side: ``python -m bench.tree_lines OLD NEW``
(NEW may be ``.``: the working tree). Per room (a top-level package, and each sub-package of
``shared/``): modules and lines; over the whole runtime (shared, supervisor, worker, jobq): files
at 350-400 and over 400 lines, functions over 40 lines, the average line length and the share of
lines over 100 characters. Reads the commits with ``git show``: nothing is checked out.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

RUNTIME = ("shared", "supervisor", "worker", "jobq")


def files(ref: str) -> dict[str, str]:
    """``{path: text}`` of the runtime's Python files at ``ref`` (``.``: the working tree)."""
    if ref == ".":
        return {
            p.as_posix(): p.read_text(encoding="utf-8")
            for pkg in RUNTIME
            for p in sorted(Path(pkg).rglob("*.py"))
        }
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", ref, "--", *RUNTIME],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        n: subprocess.run(
            ["git", "show", f"{ref}:{n}"], capture_output=True, text=True, check=True
        ).stdout
        for n in names
        if n.endswith(".py")
    }


def room(path: str) -> str:
    parts = path.split("/")
    if parts[0] == "shared" and len(parts) > 2:
        return f"shared/{parts[1]}/"
    if parts[0] == "supervisor" and len(parts) > 2:
        return f"supervisor/{parts[1]}/"
    return parts[0] + ("/ (top)" if len(parts) > 1 else "")


def shape(tree: dict[str, str]) -> dict[str, object]:
    """The figures of one tree (see the module's docstring)."""
    rooms: Counter[str] = Counter()
    modules: Counter[str] = Counter()
    lines = long_lines = chars = near = over = long_functions = 0
    for path, text in tree.items():
        rows = text.splitlines()
        rooms[room(path)] += len(rows)
        modules[room(path)] += 1
        lines += len(rows)
        chars += sum(len(r) for r in rows if r.strip())
        long_lines += sum(1 for r in rows if len(r) > 100)
        near += 350 <= len(rows) <= 400
        over += len(rows) > 400
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                long_functions += (node.end_lineno or node.lineno) - node.lineno + 1 > 40
    nonblank = sum(1 for t in tree.values() for r in t.splitlines() if r.strip())
    return {
        "rooms": {r: (modules[r], rooms[r]) for r in sorted(rooms)},
        "modules": len(tree),
        "lines": lines,
        "files 350-400 lines": near,
        "files over 400 lines": over,
        "functions over 40 lines": long_functions,
        "average line (characters, non-blank)": round(chars / max(nonblank, 1), 1),
        "lines over 100 characters": f"{100 * long_lines / max(lines, 1):.1f}%",
    }


def main(old: str, new: str) -> None:
    a, b = shape(files(old)), shape(files(new))
    print(f"| room | {old}: modules / lines | {new}: modules / lines |\n|---|---|---|")
    for r in sorted(set(a["rooms"]) | set(b["rooms"])):  # type: ignore[arg-type]
        x = a["rooms"].get(r)  # type: ignore[attr-defined]
        y = b["rooms"].get(r)  # type: ignore[attr-defined]
        print(
            f"| {r} | {f'{x[0]} / {x[1]:,}' if x else '-'} | {f'{y[0]} / {y[1]:,}' if y else '-'} |"
        )
    print(f"\n| whole runtime | {old} | {new} |\n|---|---|---|")
    for k in a:
        if k != "rooms":
            print(f"| {k} | {a[k]} | {b[k]} |")


if __name__ == "__main__":
    main(*(sys.argv[1:3] if len(sys.argv) >= 3 else ("HEAD", ".")))

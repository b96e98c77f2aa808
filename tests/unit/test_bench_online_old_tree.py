"""The online upgrade's bench (bench/pg_online_upgrade.py) runs the old version from the
checkout named by ``--old-tree``: it refuses to start without one, or with one that is not
the version before the native step (as a subprocess with it on PYTHONPATH says)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.pg_online_upgrade import main, old_tree_error
from shared.engines.postgres import schema


def tree(root: Path, version: int) -> Path:
    """A checkout whose ``shared/engines/postgres/schema.py`` says ``VERSION = version``."""
    pkg = root / "shared" / "engines" / "postgres"
    pkg.mkdir(parents=True)
    for d in (root / "shared", root / "shared" / "engines", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "schema.py").write_text(f"VERSION = {version}\n")
    return root


def test_a_checkout_of_the_version_before_the_native_step_is_taken(tmp_path: Path) -> None:
    assert old_tree_error(str(tree(tmp_path, schema.NATIVE_VERSION - 1))) is None


def test_a_checkout_of_another_version_is_refused_naming_both(tmp_path: Path) -> None:
    why = old_tree_error(str(tree(tmp_path, schema.NATIVE_VERSION)))
    assert why is not None and str(tmp_path) in why
    assert f"version {schema.NATIVE_VERSION};" in why and f"{schema.NATIVE_VERSION - 1}" in why


def test_a_path_without_jobq_is_refused_naming_the_file(tmp_path: Path) -> None:
    why = old_tree_error(str(tmp_path))
    assert why is not None and "shared/engines/postgres/schema.py" in why


@pytest.mark.parametrize("args", [[], ["--old-tree", ""], ["--old-tree", "/nonexistent"]])
def test_the_bench_will_not_start_without_an_old_tree(args: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit:
        main([*args, "--database", "postgresql://nowhere.invalid/x"])
    assert exit.value.code == 2 and "--old-tree" in capsys.readouterr().err

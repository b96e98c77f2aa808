"""``@task`` is typed: ``mypy --strict`` rejects a call of ``.enqueue`` that does not
fit the function's signature, and accepts the right ones; the handle carries the result type.

Runs mypy in a subprocess on a small user file (mypy is in the ``test`` extra). Only the user
file's errors count (``--follow-imports=silent``): jobq's own modules are not on trial here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())

USER_FILE = """\
import datetime
import uuid
from decimal import Decimal

from jobq import JobHandle, JobQueue, codec, current_job, task


@task(max_attempts=3)
def send_invoice(invoice_id: int, email: str) -> dict[str, str]:
    return {"sent": email}


@task
async def ping(n: int) -> int:
    return n


@task
def settle(order: uuid.UUID, at: datetime.datetime, amounts: list[Decimal]) -> Decimal:
    current_job().progress(0.5)
    current_job().check_cancelled()
    return sum(amounts, Decimal(0))


@task(retry_for=(ConnectionError, TimeoutError), no_retry_for=ValueError, backoff=2.0, jitter=0.1, max_delay=60, limit_key=lambda customer_id, **_: customer_id)  # ok
def charge(customer_id: str, cents: int) -> None:
    pass


@task(schedule="*/5 * * * *", tz="Europe/Paris", schedule_args={"customer_id": "all"})  # ok
def sweep(customer_id: str) -> None:
    pass


@task(schedule=5)  # wrong: a cron expression is text
def tick() -> None:
    pass


@task(unique="pending")  # ok
def refresh(shop: int) -> None:
    pass


@task(unique=["pending"])  # wrong: a scope is a name or a period
def refresh_all() -> None:
    pass


def right(q: JobQueue) -> None:
    handle: JobHandle[dict[str, str]] = send_invoice.enqueue(42, email="a@b.c")  # ok
    receipt: dict[str, str] = handle.wait(timeout=5)  # ok
    send_invoice.using(queue=q, key="inv-42").enqueue(42, "a@b.c")  # ok
    pong: JobHandle[int] = ping.enqueue(3)  # ok
    direct: dict[str, str] = send_invoice(1, "x")  # ok
    now = datetime.datetime.now(datetime.timezone.utc)
    total: Decimal = settle.enqueue(uuid.uuid4(), now, [Decimal(1)]).wait()  # ok
    attempt: int = current_job().attempt  # ok
    codec(complex, encode=lambda c: [c.real, c.imag], decode=lambda d: complex(*d))  # ok
    charge.using(retry_for=KeyError, jitter=False, limit_key="acme").enqueue("c1", 5)  # ok
    refresh.using(unique="10m", key="shop-1").enqueue(1)  # ok
    refresh.using(unique=600).enqueue(2)  # ok
    q.enqueue("report:generate", {"id": 1}, key="r1", unique="active")  # ok


async def right_async(q: JobQueue) -> None:
    handle: JobHandle[dict[str, str]] = await send_invoice.enqueue_async(42, email="a@b.c")  # ok
    receipt: dict[str, str] = await handle.wait_async(timeout=5)  # ok
    state: str = await handle.status_async()  # ok
    await send_invoice.using(queue=q, key="inv-42").enqueue_async(42, "a@b.c")  # ok
    pong: JobHandle[int] = await ping.enqueue_async(3)  # ok
    job_id: str = await q.enqueue_async("report:generate", {"id": 1}, delay=5)  # ok
    ids: list[str] = await q.enqueue_many_async([("report:generate", {"id": 2})])  # ok


async def wrong_async(q: JobQueue) -> None:
    await send_invoice.enqueue_async("x")  # wrong: str for int, email missing
    await send_invoice.using(delay=5).enqueue_async(42, mail="a@b.c")  # wrong: unknown keyword
    text: str = await (await ping.enqueue_async(3)).wait_async()  # wrong: the result is an int
    await q.enqueue_async("report:generate", {}, dely=5)  # wrong: unknown keyword
    await q.enqueue_async("report:generate", {}, unique=("pending",))  # wrong: a tuple
    job_id: int = await q.enqueue_async("report:generate")  # wrong: the id is a str


def wrong() -> None:
    send_invoice.enqueue("x")  # wrong: str for int, email missing
    send_invoice.using(delay=5).enqueue(42, mail="a@b.c")  # wrong: unknown keyword
    ping.enqueue()  # wrong: n missing
    charge.using(retry_for=KeyError()).enqueue("c1", 5)  # wrong: an instance, not a class
    charge.using(backoff="2s").enqueue("c1", 5)  # wrong: seconds are a number
    text: str = send_invoice.enqueue(1, "x").wait()  # wrong: the result is a dict
    settle.enqueue("not-a-uuid", datetime.datetime.now(), [])  # wrong: str for UUID
    cents: int = settle.enqueue(uuid.uuid4(), datetime.datetime.now(), []).wait()  # wrong: Decimal
"""


def test_mypy_strict_rejects_wrong_enqueue_calls_and_accepts_right_ones(tmp_path):
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    user = tmp_path / "user_tasks.py"
    user.write_text(USER_FILE)
    env = dict(
        os.environ, MYPYPATH=str(REPO)
    )  # an editable install's import hook is invisible to mypy
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(user),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=240,
    )
    assert "error: Cannot find implementation or library stub" not in out.stdout, out.stdout
    lines = USER_FILE.splitlines()
    flagged = {int(m.group(1)) for m in re.finditer(r"user_tasks\.py:(\d+): error:", out.stdout)}
    wrong = {n for n, text in enumerate(lines, 1) if "# wrong" in text}
    right = {n for n, text in enumerate(lines, 1) if "# ok" in text}
    assert wrong <= flagged, out.stdout
    assert not right & flagged, out.stdout
    assert out.returncode == 1, out.stdout + out.stderr

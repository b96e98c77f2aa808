"""Example tasks (docs/tasks.md): jobs declared as typed Python functions.

List this module in ``jobq.toml`` (``handlers = ["examples.tasks"]``) and enqueue from anywhere:

    from examples.tasks import send_invoice
    receipt = send_invoice.enqueue(42, email="a@b.c").wait(timeout=30)
"""

from __future__ import annotations

import asyncio

from jobq import PermanentError, task


@task(max_attempts=5, timeout=60)
def send_invoice(invoice_id: int, email: str, lines: list[str] | None = None) -> dict[str, object]:
    """Send invoice ``invoice_id`` to ``email``; what was sent. A bad address fails at once."""
    if "@" not in email:
        raise PermanentError(f"invoice {invoice_id}: {email!r} is not an email address")
    return {"invoice": invoice_id, "sent_to": email, "lines": len(lines or [])}


@task(name="rates:fetch")
async def fetch_rate(currency: str) -> float:
    """An async task: the worker awaits it."""
    await asyncio.sleep(0)  # stands for an async HTTP call
    return {"EUR": 1.0, "USD": 1.08}.get(currency, 0.0)

"""The handlers jobq's workers run for this site (``handlers = ["orders.jobs"]`` in jobq.toml).

A worker process is not a Django process: importing this module sets Django up first, so the
handler can use the ORM.
"""

import os

import django
from django.apps import apps

if not apps.ready:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
    django.setup()

from jobq import PermanentError, handler  # noqa: E402  (after django.setup())

from .models import Order  # noqa: E402


@handler("order:confirm", max_attempts=5)
def confirm_order(payload, job):
    try:
        order = Order.objects.get(id=payload["order_id"])
    except Order.DoesNotExist:
        raise PermanentError(f"order {payload['order_id']} does not exist") from None
    order.confirmed = True
    order.save(update_fields=["confirmed"])
    return {"order": order.id, "confirmed": True}

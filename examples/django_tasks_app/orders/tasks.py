"""The example's task. jobq's workers import this module (``handlers`` in jobq.toml, after
``jobq.django.worker``); its job type is ``orders.tasks.confirm_order``."""

try:
    from django.tasks import task  # Django 6
except ImportError:
    from django_tasks import task  # Django 5.2: the backport

from .models import Order


@task
def confirm_order(order_id: int) -> dict:
    order = Order.objects.get(id=order_id)
    order.confirmed = True
    order.save(update_fields=["confirmed"])
    return {"order": order_id, "confirmed": True}

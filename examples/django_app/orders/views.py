"""``POST /orders/ {"item": ..., "quantity": n}``: save the order and enqueue its confirmation
job in ONE transaction. If anything in the block raises, both roll back: no order without its
job, no job for an order that was never saved."""

import json

from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .models import Order
from .queue import get_queue

MAX_QUANTITY = 10


class OrderRefused(ValueError):
    pass


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    data = json.loads(request.body or b"{}")
    # Open (or reuse) the queue BEFORE the transaction: opening checks jobq's schema under
    # SQLite's write lock, which this request's own transaction would be holding.
    queue = get_queue()
    try:
        with transaction.atomic():
            order = Order.objects.create(item=data["item"], quantity=int(data["quantity"]))
            # conn=: the job row goes through Django's own sqlite3 connection, inside this
            # transaction; it commits or rolls back with the order.
            order.job_id = queue.enqueue(
                "order:confirm", {"order_id": order.id}, conn=connection.connection
            )
            order.save(update_fields=["job_id"])
            if order.quantity > MAX_QUANTITY:  # a check that fails after the enqueue
                raise OrderRefused(f"at most {MAX_QUANTITY} per order, got {order.quantity}")
    except OrderRefused as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({"order": order.id, "job": order.job_id}, status=201)

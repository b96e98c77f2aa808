"""``POST /orders/ {"item": ..., "quantity": n}``: save the order and enqueue its confirmation
in ONE transaction; ``GET /orders/tasks/<id>/``: how the confirmation went."""

import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from .models import Order
from .tasks import confirm_order

MAX_QUANTITY = 10


class OrderRefused(ValueError):
    pass


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    data = json.loads(request.body or b"{}")
    try:
        with transaction.atomic():
            order = Order.objects.create(item=data["item"], quantity=int(data["quantity"]))
            # Written through Django's own connection, inside this transaction: the task
            # commits or rolls back with the order.
            order.task_id = confirm_order.enqueue(order.id).id
            order.save(update_fields=["task_id"])
            if order.quantity > MAX_QUANTITY:  # a check that fails after the enqueue
                raise OrderRefused(f"at most {MAX_QUANTITY} per order, got {order.quantity}")
    except OrderRefused as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({"order": order.id, "task": order.task_id}, status=201)


@require_GET
def confirmation(request: HttpRequest, task_id: str) -> JsonResponse:
    result = confirm_order.get_result(task_id)
    body = {"status": str(result.status), "errors": [e.traceback for e in result.errors]}
    if result.status == "SUCCESSFUL":
        body["return_value"] = result.return_value
    return JsonResponse(body)

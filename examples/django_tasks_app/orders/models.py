from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    quantity = models.PositiveIntegerField()
    confirmed = models.BooleanField(default=False)
    task_id = models.CharField(max_length=64, blank=True)

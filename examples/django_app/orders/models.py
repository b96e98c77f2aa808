from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    quantity = models.PositiveIntegerField()
    confirmed = models.BooleanField(default=False)
    job_id = models.CharField(max_length=40, blank=True)

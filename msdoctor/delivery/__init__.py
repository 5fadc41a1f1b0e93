"""Alert delivery: the feed of transitions from ``alerts.jsonl`` and its receivers
(Alertmanager ``/api/v2/alerts``, generic webhooks), sent from background threads."""
from msdoctor.delivery.alertmanager import AlertmanagerDeliverer
from msdoctor.delivery.feed import AlertFeed, alert_key
from msdoctor.delivery.webhook import WebhookDeliverer
from msdoctor.delivery.worker import Deliverer, DeliveryError

__all__ = ["AlertFeed", "AlertmanagerDeliverer", "Deliverer", "DeliveryError",
           "WebhookDeliverer", "alert_key"]

"""Alert delivery: listeners of the active-alert set that send each transition to a receiver
(Alertmanager ``/api/v2/alerts``, generic webhooks) from background threads."""
from msdoctor.delivery.alertmanager import AlertmanagerDeliverer
from msdoctor.delivery.webhook import WebhookDeliverer
from msdoctor.delivery.worker import Deliverer, DeliveryError

__all__ = ["AlertmanagerDeliverer", "Deliverer", "DeliveryError", "WebhookDeliverer"]

"""Alerts: the transition record, its durable history and the stop-request action."""
from msdoctor.core.alerts.journal import ALERTS_FILE, AlertJournal, read_alerts
from msdoctor.core.alerts.model import Alert
from msdoctor.core.alerts.stop import STOP_FILE, write_stop_request

__all__ = ["Alert", "AlertJournal", "ALERTS_FILE", "read_alerts", "STOP_FILE",
           "write_stop_request"]

"""msdoctor's monitoring mixin: Grafana dashboards and Prometheus fleet rules, as code.

``python grafana/build.py`` writes the committed artefacts; a test checks they
match what this package generates.
"""
from grafana.mixin.render import DASHBOARDS, RULES_PATH, render_all, render_dashboard, render_rules

__all__ = ["DASHBOARDS", "RULES_PATH", "render_all", "render_dashboard", "render_rules"]

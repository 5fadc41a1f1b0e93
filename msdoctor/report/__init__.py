"""``msdoctor report``: a self-contained HTML page (inline SVG charts, no scripts, no network)
of a run or a training log: loss raw and smoothed, grad norm, loss scale, throughput, with
the alerts marked on the charts and listed with their fixes."""
from msdoctor.report.curves import CurveCollector
from msdoctor.report.page import render_page

__all__ = ["render_page", "CurveCollector"]

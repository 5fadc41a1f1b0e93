"""Shared panel and query helpers for the msdoctor dashboards (grafana-foundation-sdk).

Every query names its metric through :mod:`msdoctor.exporter.names`, so the
dashboards and the exporter cannot drift apart. Panels are placed by the SDK's
auto-layout (``span``/``height``) in rows of the 24-column grid.
"""
from __future__ import annotations

from typing import Optional, Sequence

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders.common import VizLegendOptions, VizTooltipOptions
from grafana_foundation_sdk.models.common import (
    BigValueColorMode,
    BigValueGraphMode,
    LegendDisplayMode,
    LegendPlacement,
    TooltipDisplayMode,
)
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    VariableHide,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

from msdoctor.exporter import names

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")

#: Label selector every fleet query carries.
RUN = 'run=~"$run"'
RANK = 'rank=~"$rank"'
RUN_RANK = f"{RUN},{RANK}"
LEGEND_RANK = "{{run}} rank {{rank}}"


def sel(short: str, selector: str = RUN_RANK) -> str:
    """``metric{selector}`` for a short metric name: ``sel("loss")``."""
    return f"{names.metric(short)}{{{selector}}}"


def query(expr: str, legend: str = LEGEND_RANK, ref: str = "A",
          instant: bool = False, table_format: bool = False) -> prometheus.Dataquery:
    """A Prometheus query against ``$datasource``."""
    q = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE)
    if instant:
        q = q.instant()
    else:
        q = q.range()
    if table_format:
        from grafana_foundation_sdk.models.prometheus import PromQueryFormat
        q = q.format(PromQueryFormat.TABLE)
    return q


def timeseries_panel(title: str, unit: str, *targets: prometheus.Dataquery,
                     description: str = "", span: int = 12, height: int = 8,
                     log_scale: bool = False) -> timeseries.Panel:
    """A time series panel with a table legend and a shared tooltip."""
    panel = (timeseries.Panel().title(title).description(description).datasource(DATASOURCE)
             .unit(unit).span(span).height(height).line_width(1).fill_opacity(0)
             .legend(VizLegendOptions().display_mode(LegendDisplayMode.TABLE)
                     .placement(LegendPlacement.BOTTOM).show_legend(True)
                     .calcs(["lastNotNull", "max"]))
             .tooltip(VizTooltipOptions().mode(TooltipDisplayMode.MULTI)))
    if log_scale:
        from grafana_foundation_sdk.builders.common import ScaleDistributionConfig
        from grafana_foundation_sdk.models.common import ScaleDistribution
        panel = panel.scale_distribution(
            ScaleDistributionConfig().type(ScaleDistribution.LOG).log(2))
    for target in targets:
        panel = panel.with_target(target)
    return panel


def stat_panel(title: str, unit: str, target: prometheus.Dataquery, description: str = "",
               span: int = 4, height: int = 4, decimals: Optional[int] = None) -> stat.Panel:
    """A single-value panel with a sparkline."""
    panel = (stat.Panel().title(title).description(description).datasource(DATASOURCE)
             .unit(unit).span(span).height(height).with_target(target)
             .graph_mode(BigValueGraphMode.AREA).color_mode(BigValueColorMode.VALUE))
    if decimals is not None:
        panel = panel.decimals(decimals)
    return panel


def table_panel(title: str, target: prometheus.Dataquery, description: str = "",
                span: int = 24, height: int = 8, hide: Sequence[str] = ()) -> table.Panel:
    """A table of an instant query's labels (``Time``/``Value``/``__name__`` hidden)."""
    from grafana_foundation_sdk.models.dashboard import DataTransformerConfig

    excluded = {name: True for name in ("Time", "Value", "__name__", *hide)}
    return (table.Panel().title(title).description(description).datasource(DATASOURCE)
            .span(span).height(height).with_target(target)
            .with_transformation(DataTransformerConfig(id_val="organize",
                                                       options={"excludeByName": excluded})))


def datasource_variable() -> dashboard.DatasourceVariable:
    """``$datasource``: any Prometheus data source."""
    return (dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
            .current(VariableOption(selected=True, text="Prometheus", value="Prometheus")))


def label_variable(name: str, label: str, expr: str, multi: bool) -> dashboard.QueryVariable:
    """A variable listing a label's values; ``multi`` adds "All" (matching ``.*``)."""
    variable = (dashboard.QueryVariable(name).label(label).datasource(DATASOURCE)
                .query(f"label_values({expr}, {name})")
                .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
                .sort(VariableSort.NUMERICAL_ASC if name == "rank" else VariableSort.ALPHABETICAL_ASC)
                .hide(VariableHide.DONT_HIDE))
    if multi:
        variable = variable.multi(True).include_all(True).all_value(".*")
    return variable


def alert_annotation() -> dashboard.AnnotationQuery:
    """Mark when msdoctor alerts fire (from ``msdoctor_alert``) on every time series panel."""
    return (dashboard.AnnotationQuery().name("msdoctor alerts").datasource(DATASOURCE)
            .enable(True).icon_color("red")
            .expr(f'{names.ALERT.name}{{alertstate="firing",{RUN}}}'))


def base_dashboard(title: str, uid: str, description: str) -> dashboard.Dashboard:
    """Dashboard defaults shared by every msdoctor dashboard."""
    return (dashboard.Dashboard(title).uid(uid).description(description)
            .tags(["msdoctor", "training"]).time("now-1h", "now").refresh("30s")
            .timezone("browser").tooltip(DashboardCursorSync.CROSSHAIR).editable())

"""The query layer: read-only, typed views of the sidecar's state and alerts.

The HTTP API, the TUI and the report read the core through these functions. Each
returns a frozen dataclass holding real numbers (a NaN loss stays a float NaN);
``view.to_json()`` gives the ``/api/v1`` JSON (non-finite numbers as the wire strings
``"nan"``, ``"inf"``, ``"-inf"``; shapes in ``docs/api.md``) and ``View.from_json``
reads it back, so a client of the HTTP API gets the same objects as an in-process
reader.
"""
from msdoctor.core.views.alert_views import (
                                             AlertCounts,
                                             AlertHistoryView,
                                             AlertSource,
                                             AlertsView,
                                             AlertView,
                                             alert_history,
                                             alerts,
)
from msdoctor.core.views.checkpoint_views import (
                                             CheckpointsView,
                                             CheckpointView,
                                             GoodputView,
                                             checkpoints,
                                             goodput,
)
from msdoctor.core.views.layer_views import LayerMark, LayersView, layers
from msdoctor.core.views.overview_view import (
                                             MAX_SPARK_POINTS,
                                             OverviewView,
                                             SparkView,
                                             alerts_version,
                                             overview,
)
from msdoctor.core.views.run_views import (
                                             Deliverer,
                                             DeliveryView,
                                             NotFound,
                                             RankDetail,
                                             RanksView,
                                             RankView,
                                             RunsView,
                                             RunView,
                                             StatusView,
                                             StepRange,
                                             rank,
                                             ranks,
                                             run,
                                             runs,
                                             status,
)
from msdoctor.core.views.series_views import (
                                             MAX_POINTS_LIMIT,
                                             RankSeriesView,
                                             RunSeriesView,
                                             SeriesView,
                                             rank_series,
                                             run_series,
)

__all__ = [
    "AlertCounts", "AlertHistoryView", "CheckpointsView", "CheckpointView", "checkpoints",
    "GoodputView", "goodput", "LayerMark", "LayersView", "layers", "AlertsView", "AlertSource",
    "AlertView", "Deliverer",
    "DeliveryView", "MAX_POINTS_LIMIT", "MAX_SPARK_POINTS", "NotFound", "OverviewView",
    "RankDetail", "RankSeriesView", "RanksView", "RankView", "RunSeriesView", "RunsView",
    "RunView", "SeriesView", "SparkView", "StatusView", "StepRange", "alert_history", "alerts",
    "alerts_version", "overview", "rank", "rank_series", "ranks", "run", "run_series", "runs",
    "status",
]

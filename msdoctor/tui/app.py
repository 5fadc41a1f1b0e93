"""``msdoctor tui``: the Textual app (Overview, Charts, Alerts) over a data source.

The app polls its :class:`~msdoctor.tui.source.Source` from a worker thread at
most every ``refresh_s`` seconds (never faster than 4 Hz), keeps the last good
snapshot on screen when the source fails, shows a banner and retries every
``retry_s`` seconds until it answers again.
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import ClassVar, Iterable, List, Optional, Tuple

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane

from msdoctor.core.format import printable
from msdoctor.tui.alertdetail import AlertScreen
from msdoctor.tui.alertpane import AlertsPane, Marks
from msdoctor.tui.chartpane import ChartsPane
from msdoctor.tui.checkpointpane import CheckpointsPane
from msdoctor.tui.columns import COLUMNS
from msdoctor.tui.helpscreen import HelpScreen
from msdoctor.tui.layerpane import LayersPane
from msdoctor.tui.logpane import LogPane
from msdoctor.tui.logtail import LogFollower
from msdoctor.tui.model import Reading
from msdoctor.tui.overview import Overview
from msdoctor.tui.ranktable import RankTable
from msdoctor.tui.reader import SPARK_SIGNAL, Request, SourceError
from msdoctor.tui.source import Source

PANES = ("overview", "charts", "alerts", "logs", "checkpoints", "layers")
MIN_SIZE = (60, 15)
MIN_REFRESH_S = 0.25            # at most 4 refreshes a second


class DoctorApp(App[None]):
    """Every rank's health, the curves and the alerts with their fixes."""

    CSS_PATH = "app.tcss"
    TITLE = "msdoctor"
    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("tab", "pane(1)", "Next pane", priority=True, show=False),
        Binding("shift+tab", "pane(-1)", "Prev pane", priority=True, show=False),
        Binding("1", "show_pane('overview')", "Overview", show=False),
        Binding("2", "show_pane('charts')", "Charts", show=False),
        Binding("3", "show_pane('alerts')", "Alerts", show=False),
        Binding("4", "show_pane('logs')", "Logs", show=False),
        Binding("5", "show_pane('checkpoints')", "Checkpoints", show=False),
        Binding("6", "show_pane('layers')", "Layers", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("R", "next_run", "Next run", show=False),
        Binding("ctrl+r", "refresh_now", "Refresh", show=False),
    ]

    def __init__(self, source: Source, refresh_s: float = 1.0, retry_s: float = 2.0,
                 poll: bool = True) -> None:
        super().__init__()
        self.source = source
        self.refresh_s = max(MIN_REFRESH_S, float(refresh_s))
        self.retry_s = max(MIN_REFRESH_S, float(retry_s))
        self.poll = poll
        self.marks = Marks()
        self.reading: Optional[Reading] = None
        self.error: Optional[str] = None
        self.run_name: Optional[str] = None
        self.chart_ranks: Tuple[int, ...] = ()
        self.chart_window: Optional[int] = None
        self.filters = {"overview": "", "alerts": ""}
        self.fetches = 0
        self.last_screenshot: Optional[str] = None
        self.logs = LogFollower(source.run_dir)
        self._busy = False
        self._next_try = 0.0

    # -- layout -------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="banner")
        yield Static("", id="too-small")
        with TabbedContent(initial="overview", id="panes"):
            with TabPane("Overview", id="overview"):
                yield Overview(id="overview-pane")
            with TabPane("Charts", id="charts"):
                yield ChartsPane(id="charts-pane")
            with TabPane("Alerts", id="alerts"):
                yield AlertsPane(self.marks, id="alerts-pane")
            with TabPane("Logs", id="logs"):
                yield LogPane(id="logs-pane")
            with TabPane("Checkpoints", id="checkpoints"):
                yield CheckpointsPane(id="checkpoints-pane")
            with TabPane("Layers", id="layers"):
                yield LayersPane(id="layers-pane")
        yield Input(placeholder="filter…  (enter: keep, esc: clear)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.source.label
        self.query_one(Overview).show_waiting(self.source.label)
        self.query_one(RankTable).focus()
        self._check_size(self.size.width, self.size.height)
        if self.poll:
            self.set_interval(self.refresh_s, self._tick)
            self._tick()

    @property
    def pane(self) -> str:
        return str(self.query_one(TabbedContent).active)

    # -- refresh ------------------------------------------------------------------
    def request(self) -> Request:
        if self.pane == "overview" and self.query_one(Overview).wants_curves:
            return Request(run=self.run_name, charts=True, curves=True)   # the worst rank's
        return Request(run=self.run_name, charts=self.pane == "charts",
                       chart_ranks=self.chart_ranks, chart_window=self.chart_window,
                       checkpoints=self.pane == "checkpoints", layers=self.pane == "layers",
                       # the sparklines are drawn in the rank table only: not fetched while
                       # another pane hides it (a fresh fetch follows the switch back)
                       spark_signal=SPARK_SIGNAL if self.pane == "overview" else None)

    def _tick(self) -> None:
        if self._busy or time.monotonic() < self._next_try:
            return
        self.run_worker(self.refresh_data(), group="fetch", exit_on_error=False)

    async def refresh_data(self) -> bool:
        """Fetch one snapshot (in a thread) and show it; False when the source failed."""
        if self._busy:
            return False
        self._busy = True
        request = self.request()
        if self.pane == "logs":
            await self.refresh_logs()
        try:
            snap = await asyncio.to_thread(self.source.fetch, request)
        except SourceError as exc:
            self.show_error(str(exc))
            return False
        except Exception as exc:  # noqa: BLE001 - a bad answer must not kill the UI
            self.show_error(f"{type(exc).__name__}: {exc}")
            return False
        finally:
            self._busy = False
            self.fetches += 1
        self.show_reading(snap, request)
        return True

    def show_reading(self, snap: Reading, request: Optional[Request] = None) -> None:
        """Render ``snap`` in every pane (also how tests feed fixed data); its charts go to
        the Charts pane, or to the overview's curves when ``request`` asked for those."""
        if self.error is not None:
            self.notify(f"Connected to {self.source.label} again.", title="Reconnected")
        self.error = None
        self._next_try = 0.0
        self.query_one("#banner").display = False
        previous, self.reading = self.reading, snap
        if snap.run is not None:
            self.run_name = snap.run.run
        overview = self.query_one(Overview)
        was_room = overview.wants_curves
        overview.show(snap)
        if previous is None or snap.active is not previous.active or \
                snap.resolved is not previous.resolved:   # the reader reuses unchanged lists
            self.query_one(AlertsPane).show(snap.alerts)
        if snap.charts is not None:
            curves = request.curves if request is not None else \
                self.pane == "overview" and overview.wants_curves
            if curves:
                overview.show_curves(snap.charts)
            else:
                self.query_one(ChartsPane).show(snap.charts)
        if snap.checkpoints is not None:
            self.query_one(CheckpointsPane).show(snap.checkpoints)
        if snap.layers is not None:
            self.query_one(LayersPane).show(snap.layers)
        if overview.wants_curves and not was_room and self.pane == "overview":
            self.action_refresh_now()           # room appeared: fetch the curves now
        firing = snap.run.firing if snap.run else 0
        tab = self.query_one(TabbedContent).get_tab("alerts")
        label = f"Alerts ({firing})" if firing else "Alerts"
        if str(tab.label) != label:             # a new label lays the screen out again
            tab.label = label

    async def refresh_logs(self) -> None:
        """Read what the followed log file gained (in a thread) and show it."""
        if self.logs.run_dir is None and self.source.run_dir is not None:
            self.logs = LogFollower(self.source.run_dir)
        pane = self.query_one(LogPane)
        if self.logs.run_dir is None:
            pane.show_missing(
                f"No run directory on this machine: {self.source.label} reads one elsewhere. "
                "Run msdoctor tui on the training node, or with --run-dir DIR, to see its logs.")
            return
        chunk = await asyncio.to_thread(self.logs.poll)
        pane.show(chunk, self.logs.run_dir)

    def on_log_pane_picked(self, event: LogPane.Picked) -> None:
        self.logs.pick(event.step)
        self.action_refresh_now()

    def show_error(self, message: str) -> None:
        """The banner: what failed, that data is stale, that it retries."""
        self.error = message
        self._next_try = time.monotonic() + self.retry_s
        banner = self.query_one("#banner", Static)
        kept = " Showing the last data received." if self.reading is not None else ""
        banner.update(f"⚠ {message}.{kept} Retrying every {self.retry_s:g}s…")
        banner.display = True
        if self.reading is None:
            self.query_one(Overview).show_waiting(
                self.source.label, f"Waiting for {self.source.label}…\n\n{message}\n\n"
                "Start the sidecar:  msdoctor serve --run-dir RUN_DIR\n"
                "or read a run directory directly:  msdoctor tui --run-dir RUN_DIR")

    # -- size ---------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self._check_size(event.size.width, event.size.height)

    def _check_size(self, width: int, height: int) -> None:
        small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        self.screen.set_class(small, "-too-small")
        if small:
            self.query_one("#too-small", Static).update(
                f"Terminal too small ({width}×{height}).\nmsdoctor tui needs at least "
                f"{MIN_SIZE[0]}×{MIN_SIZE[1]}: enlarge the window.")

    # -- actions ------------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_pane(self, step: int) -> None:
        self.action_show_pane(PANES[(PANES.index(self.pane) + step) % len(PANES)])

    def action_show_pane(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane = str(event.pane.id)
        self.query_one("#filter", Input).display = bool(self.filters.get(pane))
        self.query_one("#filter", Input).value = self.filters.get(pane, "")
        self._focus_pane(pane)
        self.refresh_bindings()
        if pane == "alerts":
            self.query_one(AlertsPane).flush()
        if pane in ("overview", "charts", "logs", "checkpoints", "layers") and self.poll:
            self._next_try = 0.0
            self._tick()

    def check_action(self, action: str, parameters: Tuple[object, ...]) -> Optional[bool]:
        """The Logs pane has no filter: its key is hidden there."""
        return not (action == "filter" and self.pane == "logs")

    def action_filter(self) -> None:
        if self.pane == "logs":
            return
        if self.pane == "charts":
            self.query_one("#chart-ranks", Input).focus()
            return
        box = self.query_one("#filter", Input)
        box.display = True
        box.value = self.filters.get(self.pane, "")
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if self.pane in self.filters:
            self.apply_filter("")
        box.display = False
        self._focus_pane()

    def apply_filter(self, text: str) -> None:
        pane = self.pane
        if pane not in self.filters:
            return
        self.filters[pane] = text
        if pane == "overview":
            self.query_one(RankTable).set_filter(text)
        else:
            self.query_one(AlertsPane).set_filter(text)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.apply_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.apply_filter(event.value)
            event.input.display = bool(event.value)
            self._focus_pane()

    def _focus_pane(self, pane: Optional[str] = None) -> None:
        target = {"overview": RankTable, "charts": "#chart-loss", "alerts": "#alerts-table",
                  "logs": "#log-view", "checkpoints": "#checkpoints-pane",
                  "layers": "#layers-pane"}
        self.query_one(target[pane or self.pane]).focus()

    def on_rank_table_selected(self, event: RankTable.Selected) -> None:
        self.chart_ranks = (event.rank,)
        self.query_one(ChartsPane).pick(self.chart_ranks)
        self.action_show_pane("charts")

    def on_charts_pane_ranks_picked(self, event: ChartsPane.RanksPicked) -> None:
        self.chart_ranks = event.ranks
        self.action_refresh_now()

    def on_charts_pane_zoomed(self, event: ChartsPane.Zoomed) -> None:
        self.chart_window = event.window
        self.action_refresh_now()

    def on_alerts_pane_opened(self, event: AlertsPane.Opened) -> None:
        self.push_screen(AlertScreen(event.item, self.marks),
                         callback=lambda _: self.query_one(AlertsPane).show(
                             self.reading.alerts if self.reading else ()))

    def action_next_run(self) -> None:
        runs = self.reading.runs if self.reading else ()
        if len(runs) > 1:
            i = runs.index(self.run_name) if self.run_name in runs else -1
            self.show_run(runs[(i + 1) % len(runs)])

    def show_run(self, run: str) -> None:
        self.run_name = run
        self.chart_ranks = ()
        self.notify(f"Showing run {run}")
        self.action_refresh_now()

    def action_refresh_now(self) -> None:
        if self.poll:
            self._next_try = 0.0
            self._tick()

    def sort_by(self, key: str) -> None:
        self.action_show_pane("overview")
        self.query_one(RankTable).sort_by(key)

    def jump_to_worst(self) -> None:
        self.action_show_pane("overview")
        self.query_one(RankTable).action_worst()

    def filter_ranks(self, text: str) -> None:
        self.action_show_pane("overview")
        box = self.query_one("#filter", Input)
        box.value = text
        box.display = bool(text)
        self.apply_filter(text)

    # -- screenshots --------------------------------------------------------------
    def screenshot_dir(self) -> Path:
        """Where screenshots go: the run directory when there is one here, else the working
        directory (Textual's default, ~/Downloads, may not exist on a training node)."""
        return self.source.run_dir or Path(os.getcwd())

    def deliver_screenshot(self, filename: Optional[str] = None, path: Optional[str] = None,
                           time_format: Optional[str] = None) -> Optional[str]:
        """Save an SVG of the screen (the palette's "Screenshot") and say where."""
        folder = Path(path) if path else self.screenshot_dir()
        try:
            saved = self.save_screenshot(filename, str(folder), time_format)
        except OSError as exc:
            self.notify(printable(f"Cannot save a screenshot in {folder}: {exc.strerror or exc}"),
                        title="Screenshot", severity="error", markup=False)
            return None
        self.last_screenshot = saved
        self.notify(printable(f"Saved {saved}"), title="Screenshot", markup=False)
        return saved

    # -- command palette ----------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for pane in PANES:
            yield SystemCommand(f"Go to {pane.title()}", f"Show the {pane} pane",
                                lambda p=pane: self.action_show_pane(p))
        yield SystemCommand("Jump to the worst rank", "Overview: put the cursor on the rank "
                            "that most needs a look", self.jump_to_worst)
        yield SystemCommand("Show only ranks with alerts", "Overview filter: alert",
                            lambda: self.filter_ranks("alert"))
        yield SystemCommand("Show only ranks with a non-finite loss", "Overview filter: nan",
                            lambda: self.filter_ranks("nan"))
        yield SystemCommand("Show every rank", "Clear the overview filter",
                            lambda: self.filter_ranks(""))
        for column in COLUMNS:
            title = column.title or "status"
            yield SystemCommand(f"Sort ranks by {title}", column.help,
                                lambda k=column.key: self.sort_by(k), discover=False)
        for run in (self.reading.runs if self.reading else ()):
            yield SystemCommand(f"Show run {run}", "Switch the run shown",
                                lambda r=run: self.show_run(r), discover=False)
        yield SystemCommand("Refresh now", "Fetch new data now", self.action_refresh_now)
        yield SystemCommand("Help", "Keys, filter syntax and colours", self.action_help)

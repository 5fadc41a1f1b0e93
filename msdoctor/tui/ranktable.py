"""The rank table: one line per rank, virtualised (only the visible lines are drawn).

A Line-API widget, so 1024 ranks cost as much to draw as the 20 on screen;
replacing the rows is a sort of a list. The cursor follows a rank, not a
position, across refreshes and re-sorts. Click a header to sort by it.
"""
from __future__ import annotations

from typing import ClassVar, Dict, List, Optional, Sequence, Tuple

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from msdoctor.core.format import nonfinite
from msdoctor.tui.columns import BY_KEY, COLUMNS, SORT_KEYS, Column, fit
from msdoctor.tui.model import RankRow, worst
from msdoctor.tui.rankfilter import RankFilter, parse

STALE_STYLE = Style(color="grey50")        # a stale rank's values are no longer current
HEALTH_STYLE = {"bad": "bold red", "warn": "bold yellow", "stale": "magenta", "ok": "green",
                "done": "blue"}
BOLD_RED = Style(bold=True, color="red")
_PLAIN = frozenset(("rank", "step"))    # cells never coloured by their value or staleness


class RankTable(ScrollView, can_focus=True):
    """Ranks as rows, signals as columns; sortable, filterable, with a cursor."""

    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Charts"),
        Binding("s", "next_sort", "Sort"),
        Binding("r", "reverse", "Reverse", show=False),
        Binding("w", "worst", "Worst rank"),
    ]

    COMPONENT_CLASSES: ClassVar[set] = {"rank-table--header", "rank-table--cursor",
                                        "rank-table--sorted"}

    DEFAULT_CSS = """
    RankTable { height: 1fr; }
    RankTable > .rank-table--header { text-style: bold; background: $panel; }
    RankTable > .rank-table--sorted { text-style: bold underline; background: $panel; }
    RankTable > .rank-table--cursor { background: $boost; text-style: bold; }
    RankTable:focus > .rank-table--cursor { background: $accent 40%; }
    """

    class Selected(Message):
        """Enter or a click on a rank."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.columns: Sequence[Column] = COLUMNS
        self.sort_key = "rank"
        self.sort_reverse = False
        self.filter: RankFilter = parse("")
        self._all: List[RankRow] = []
        self.rows: List[RankRow] = []
        self.cursor_rank: Optional[int] = None
        self._index: Dict[int, int] = {}
        self._fit_width = -1
        self.shown: List[Tuple[Column, int]] = fit(self.columns, 0)
        self._width = sum(w for _, w in self.shown)
        #: drawn lines by (rank or -1 for the header, cursor on it); emptied whenever the rows,
        #: the column layout or the styles change, so a refresh draws each visible line once
        self._lines: Dict[Tuple[int, bool], Strip] = {}
        self._base: Optional[Style] = None
        self._palettes: Dict[bool, Dict[str, Style]] = {}

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget()

    def _forget(self) -> None:
        """Drop the drawn lines and the base style (new data, layout or styles)."""
        self._lines.clear()
        self._base = None
        self._palettes.clear()

    def _fit(self, width: int) -> None:
        """Lay the columns out for ``width`` cells (the ALERTS column takes what is left)."""
        if width == self._fit_width:
            return
        self._fit_width = width
        self._forget()
        self.shown = fit(self.columns, width)
        self._width = sum(w for _, w in self.shown)
        self.virtual_size = Size(self._width, len(self.rows) + 1)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(self.scrollable_content_region.width)
        self.refresh()

    # -- data ------------------------------------------------------------------
    def set_rows(self, rows: Sequence[RankRow]) -> None:
        """Replace the data (keeps the sort, the filter and the cursor's rank)."""
        self._all = list(rows)
        self._rebuild()

    def set_filter(self, text: str) -> None:
        self.filter = parse(text)
        self._rebuild()

    def sort_by(self, key: str, reverse: Optional[bool] = None) -> None:
        if key not in BY_KEY:
            raise ValueError(f"unknown column {key!r}; expected one of {', '.join(SORT_KEYS)}")
        if reverse is None:   # health and alerts read best worst-first
            reverse = key in ("health", "alerts") if key != self.sort_key else not self.sort_reverse
        self.sort_key, self.sort_reverse = key, reverse
        self._rebuild()

    def _rebuild(self) -> None:
        column = BY_KEY[self.sort_key]
        rows = self.filter.apply(self._all)
        rows.sort(key=lambda r: (column.value(r), -r.rank if self.sort_reverse else r.rank),
                  reverse=self.sort_reverse)
        self.rows = rows
        self._index = {r.rank: i for i, r in enumerate(rows)}
        if self.cursor_rank not in self._index:
            self.cursor_rank = rows[0].rank if rows else None
        self.virtual_size = Size(self._width, len(rows) + 1)
        self._forget()
        self.refresh()

    @property
    def cursor(self) -> int:
        return self._index.get(self.cursor_rank, 0) if self.cursor_rank is not None else 0

    def move_to(self, rank: int) -> bool:
        """Put the cursor on ``rank`` (if shown) and scroll it into view."""
        if rank not in self._index:
            return False
        self.cursor_rank = rank
        self._scroll_to_cursor()
        self.refresh()
        return True

    # -- drawing ---------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        self._fit(width)
        if self._base is None:
            self._base = self.rich_style        # walks the ancestors: once per refresh
        base = self._base
        if y == 0:
            key = (-1, False)
        else:
            index = scroll_y + y - 1
            if index >= len(self.rows):
                return Strip.blank(width, base)
            row = self.rows[index]
            key = (row.rank, row.rank == self.cursor_rank)
        strip = self._lines.get(key)
        if strip is None:
            strip = self._header() if y == 0 else self._row(row, key[1])
            self._lines[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _header(self) -> Strip:
        base = self.get_component_rich_style("rank-table--header")
        sorted_style = self.get_component_rich_style("rank-table--sorted")
        segments = []
        for c, width in self.shown:
            title = c.title
            if c.key == self.sort_key:
                title = (title or "•") + ("▼" if self.sort_reverse else "▲")
            text = (" " + title.ljust(width - 1)) if c.align == "left" \
                else title.rjust(width - 1) + " "
            segments.append(Segment(text[:width], sorted_style if c.key == self.sort_key
                                    else base))
        return Strip(segments, self._width)

    def _palette(self, cursor: bool) -> Dict[str, Style]:
        """The styles a row's cells take, on the row's base (with or without the cursor):
        combined once per refresh, not once per cell."""
        palette = self._palettes.get(cursor)
        if palette is None:
            base = (self._base or self.rich_style) + (
                self.get_component_rich_style("rank-table--cursor") if cursor else Style())
            red = base + BOLD_RED
            palette = {"": base, "stale": base + STALE_STYLE, "nonfinite": red, "critical": red,
                       "alerts": base + Style(color="yellow"), "spark": base + Style(color="red")}
            for health, text in HEALTH_STYLE.items():
                palette["health:" + health] = base + Style.parse(text)
            self._palettes[cursor] = palette
        return palette

    def _row(self, row: RankRow, cursor: bool) -> Strip:
        """One rank's line: one segment per run of cells of the same style (most cells share
        the row's style, and every segment costs the compositor work on every frame)."""
        palette = self._palette(cursor)
        base = palette[""]
        values = row.values
        segments: List[Segment] = []
        texts: List[str] = []
        run_style = base
        for c, width in self.shown:
            key = c.key
            text = c.cell(row, width)
            style = base
            if key == "health":
                style = palette.get("health:" + row.health, base)
            elif key == "alerts":
                if row.alerts:
                    style = palette["critical" if row.critical else "alerts"]
            elif key == "spark":
                if "×" in text:
                    style = palette["spark"]
            elif key not in _PLAIN:
                if nonfinite(values.get(key)):
                    style = palette["nonfinite"]
                elif row.stale:
                    style = palette["stale"]
            if style is not run_style and texts:
                segments.append(Segment("".join(texts), run_style))
                texts = []
            run_style = style
            texts.append(text)
        if texts:
            segments.append(Segment("".join(texts), run_style))
        return Strip(segments, self._width)

    # -- moving ----------------------------------------------------------------
    def _scroll_to_cursor(self) -> None:
        height = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_offset.y)
        i = self.cursor
        if i < top:
            self.scroll_to(y=i, animate=False, immediate=True)
        elif i >= top + height:
            self.scroll_to(y=i - height + 1, animate=False, immediate=True)

    def _move(self, index: int) -> None:
        if not self.rows:
            return
        index = max(0, min(len(self.rows) - 1, index))
        self.cursor_rank = self.rows[index].rank
        self._scroll_to_cursor()
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self._move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor + direction * max(1, self.scrollable_content_region.height - 2))

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(len(self.rows) - 1)

    def action_select(self) -> None:
        if self.cursor_rank is not None:
            self.post_message(self.Selected(self.cursor_rank))

    def action_next_sort(self) -> None:
        keys = [k for k in SORT_KEYS]
        self.sort_by(keys[(keys.index(self.sort_key) + 1) % len(keys)])

    def action_reverse(self) -> None:
        self.sort_by(self.sort_key, not self.sort_reverse)

    def action_worst(self) -> None:
        bad = worst(self.rows)
        if bad is not None:
            self.move_to(bad.rank)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = offset.x + int(self.scroll_offset.x)
            for c, width in self.shown:
                if x < width:
                    self.sort_by(c.key)
                    return
                x -= width
            return
        index = int(self.scroll_offset.y) + offset.y - 1
        if 0 <= index < len(self.rows):
            rank = self.rows[index].rank
            if rank == self.cursor_rank and event.chain >= 2:
                self.post_message(self.Selected(rank))
            self.cursor_rank = rank
            self.refresh()

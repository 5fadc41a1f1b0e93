"""The runbook entry of an alert as HTML, for the report to show inline.

A rule's ``runbook_url`` such as ``docs/runbook.md#lossnonfinite`` names a section of the
shipped runbook (found beside the shipped rules: the checkout's ``docs/``, or
``share/msdoctor/docs`` of an install); the section's Markdown (paragraphs, numbered and
bulleted lists, ``**bold**`` and ``code``) is turned into escaped HTML. Nothing else is read.
"""
from __future__ import annotations

import re
from html import escape
from pathlib import Path
from typing import Dict, List, Optional

_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*")
_ITEM = re.compile(r"^\s*(?:\d+\.|[-*])\s+")


class Runbook:
    """Sections of one runbook file by their anchor (GitHub's slug of the heading)."""

    def __init__(self, path: Optional[Path]) -> None:
        self.path = path
        self.sections: Dict[str, str] = {}
        if path is not None and path.is_file():
            self.sections = sections(path.read_text(encoding="utf-8", errors="replace"))

    @classmethod
    def shipped(cls) -> "Runbook":
        from msdoctor.core.engine.loader import default_rules_dir

        return cls(default_rules_dir().parent / "docs" / "runbook.md")

    def entry(self, url: str) -> Optional[str]:
        """The section ``url`` points at as HTML, or None when it is not in this runbook."""
        if not url or "#" not in url or "://" in url:
            return None
        target, anchor = url.rsplit("#", 1)
        if self.path is None or Path(target).name != self.path.name:
            return None
        text = self.sections.get(anchor.lower())
        return None if text is None else markdown(text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(text: str) -> Dict[str, str]:
    """``## Heading`` sections (up to the next heading of level 1 or 2) by slug."""
    out: Dict[str, str] = {}
    current: Optional[str] = None
    lines: List[str] = []
    for line in text.splitlines() + ["## "]:
        match = re.match(r"^(#{1,2})\s+(.*)$", line)
        if match:
            if current is not None:
                out[current] = "\n".join(lines).strip()
            current, lines = (slug(match.group(2)) if match.group(1) == "##" else None), []
        elif current is not None:
            lines.append(line)
    return out


def _inline(text: str) -> str:
    parts, last = [], 0
    for match in _INLINE.finditer(text):
        parts.append(escape(text[last:match.start()]))
        code, bold = match.groups()
        parts.append(f"<code>{escape(code)}</code>" if code is not None
                     else f"<b>{escape(bold)}</b>")
        last = match.end()
    parts.append(escape(text[last:]))
    return "".join(parts)


def markdown(text: str) -> str:
    """Paragraphs and lists of a runbook section as HTML (everything escaped)."""
    out: List[str] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        head: List[str] = []
        items: List[List[str]] = []
        for line in lines:
            if _ITEM.match(line):
                items.append([_ITEM.sub("", line)])
            elif items:
                items[-1].append(line.strip())
            else:
                head.append(line.strip())
        if head:
            out.append(f"<p>{_inline(' '.join(head))}</p>")
        if items:
            tag = "ol" if re.match(r"^\s*\d+\.", next(x for x in lines if _ITEM.match(x))) else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{_inline(' '.join(i))}</li>" for i in items)
                       + f"</{tag}>")
    return "".join(out)

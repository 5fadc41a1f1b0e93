"""Errors of the rule engine: where a rule file is wrong, and what was expected."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from msdoctor.wire.errors import MsdoctorError


@dataclass(frozen=True)
class RuleError:
    """One problem in a rule file, located at ``path:line:col`` (1-based)."""

    path: str
    line: int
    col: int
    message: str
    group: Optional[str] = None
    rule: Optional[str] = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.col}: "
        if self.group is not None:
            where += f'group "{self.group}" '
        if self.rule is not None:
            where += f'rule "{self.rule}" ' if not self.rule.startswith("#") else f"rule {self.rule} "
        if self.group is not None or self.rule is not None:
            where = where[:-1] + ": "
        return where + self.message


class RuleSetError(MsdoctorError, ValueError):
    """A rule set that cannot be loaded; ``errors`` holds every problem found."""

    def __init__(self, errors: List[RuleError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


class ExprError(MsdoctorError, ValueError):
    """An expression that is not in the language; ``offset`` is its 0-based column."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset

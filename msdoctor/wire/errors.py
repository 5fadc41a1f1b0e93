"""The root of every error msdoctor raises on purpose: ``except MsdoctorError`` catches them all
(and nothing else: a bug stays a traceback)."""
from __future__ import annotations


class MsdoctorError(Exception):
    """Base class of msdoctor's own errors; each says what is wrong, where, and what was
    expected."""

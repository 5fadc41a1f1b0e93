"""Every exception class msdoctor defines derives from the one root, MsdoctorError, so that
``except MsdoctorError`` catches msdoctor's own errors and nothing else."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import msdoctor
from msdoctor.wire.errors import MsdoctorError


def _exception_classes():
    found = {}
    for info in pkgutil.walk_packages(msdoctor.__path__, "msdoctor."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError as exc:          # an optional extra that is not installed
            pytest.skip(f"{info.name}: {exc}")
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_msdoctor_exception_derives_from_the_root():
    classes = _exception_classes()
    assert len(classes) >= 14, sorted(classes)
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, MsdoctorError))
    assert not outside, f"not derived from MsdoctorError: {outside}"


def test_the_errors_keep_their_builtin_bases():
    from msdoctor.core.engine.errors import ExprError, RuleSetError
    from msdoctor.wire.schema import EventError

    for cls in (EventError, RuleSetError, ExprError):
        assert issubclass(cls, ValueError) and issubclass(cls, MsdoctorError)

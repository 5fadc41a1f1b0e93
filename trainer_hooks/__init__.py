"""Training-side hooks of msdoctor: stream health signals from a MindSpore job to the spool.

``from trainer_hooks import DoctorCallback`` gives the ``mindspore.train.Callback``;
``DoctorTrainOneStepCell`` the portable loss-scale train cell. Both are loaded on
first access, so ``import trainer_hooks`` itself stays cheap (no MindSpore).
"""
from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "DoctorCallback": "trainer_hooks.callback",
    "DoctorTrainOneStepCell": "trainer_hooks.cell",
    "Emitter": "trainer_hooks.emitter",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'trainer_hooks' has no attribute {name!r}; "
                             f"expected one of {', '.join(__all__)}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))

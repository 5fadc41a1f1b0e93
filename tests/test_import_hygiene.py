"""No package pulls in a heavy or optional third-party dependency it must not need (checked in a
fresh interpreter): the hooks never load Textual, the sidecar never loads MindSpore, the wire
layer loads nothing but the standard library. Which first-party modules a package may import is
checked by tests/test_layers.py."""
import json
import subprocess
import sys

import pytest

FORBIDDEN = {
    "trainer_hooks": ("textual", "prometheus_client"),
    "msdoctor": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.wire": ("mindspore", "textual", "prometheus_client", "numpy", "yaml"),
    "msdoctor.core.batch": ("mindspore", "textual", "prometheus_client"),
    "msdoctor.core.spool": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.core.state": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.core.pipeline": ("mindspore", "mindformers", "textual"),
    "msdoctor.core.engine": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.core.alerts": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.core.consumers": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.http": ("mindspore", "mindformers", "textual"),
    "msdoctor.cli": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.core.snapshot": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.exporter": ("mindspore", "mindformers", "textual"),
    "msdoctor.api": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.delivery": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.replay": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.report": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.tui": ("mindspore", "mindformers", "prometheus_client"),
    "msdoctor.cli.serve": ("mindspore", "mindformers", "textual"),
    "msdoctor.cli.train": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "msdoctor.cli.demo": ("mindspore", "mindformers", "textual", "prometheus_client"),
    "trainer_hooks.mindformers": ("textual", "prometheus_client"),
    "trainer_hooks.wire": ("mindspore", "textual", "prometheus_client", "numpy", "yaml"),
}


def _loaded_after_import(module: str) -> set:
    code = (f"import importlib, sys, json; importlib.import_module({module!r}); "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in json.loads(out.stdout.strip().splitlines()[-1])}


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_a_package_does_not_pull_in_what_it_must_not_import(module):
    loaded = _loaded_after_import(module)
    leaked = sorted(set(FORBIDDEN[module]) & loaded)
    assert not leaked, f"importing {module} loads {leaked}"


def test_importing_trainer_hooks_does_not_import_mindspore_until_a_hook_is_used():
    loaded = _loaded_after_import("trainer_hooks")
    assert "mindspore" not in loaded

"""The wheel carries what a user needs away from the checkout: the shipped rules (found by
default), their unit tests, the fleet rules and the dashboards."""
from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULE_FILES = sorted(p.name for p in (ROOT / "rules").glob("*.yaml"))
TEST_FILES = sorted(p.name for p in (ROOT / "rules" / "tests").glob("*.yaml"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtual environment with msdoctor installed from a wheel built from this tree.

    The new environment borrows this one's dependencies through a path file (no download);
    msdoctor itself comes only from the wheel.
    """
    base = tmp_path_factory.mktemp("wheel")
    wheels = base / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(wheels)],
                   check=True, capture_output=True, timeout=300, cwd=base)
    env = base / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True,
                   timeout=120)
    python = env / "bin" / "python"
    # --ignore-installed: without it pip would first uninstall this environment's msdoctor
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--ignore-installed",
                    "-q", "--prefix", str(env), *map(str, wheels.glob("msdoctor-*.whl"))],
                   check=True, capture_output=True, timeout=300, cwd=base)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "msdoctor-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return env


def run(env: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(env / "bin" / "python"), *args], capture_output=True, text=True,
                          timeout=120, cwd=env)


def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    done = run(installed, "-c", "import msdoctor; print(msdoctor.__file__)")
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve().is_relative_to(installed.resolve())


def test_installing_the_wheel_leaves_this_environment_s_msdoctor_alone(installed):
    import importlib.metadata as md

    assert md.version("msdoctor") and Path(sys.executable).with_name("msdoctor").exists()


def test_a_wheel_install_finds_the_shipped_rules_without_being_told_where(installed):
    done = run(installed, "-c", "from msdoctor.core.engine import default_rules_dir; print(default_rules_dir())")
    rules = Path(done.stdout.strip())
    assert rules == installed / "share" / "msdoctor" / "rules", done.stderr
    assert sorted(p.name for p in rules.glob("*.yaml")) == RULE_FILES
    listed = run(installed, "-m", "msdoctor", "rules", "check")
    assert listed.returncode == 0, listed.stderr
    assert f"rules in {len(RULE_FILES)} files" in listed.stdout


def test_a_wheel_install_carries_the_rule_tests_fleet_rules_and_dashboards(installed):
    """Every rule test file ships, and the installed command runs one (the smallest: the
    checkout's tests run them all in-process, which need not be done twice)."""
    share = installed / "share" / "msdoctor"
    shipped = sorted(p.name for p in (share / "rules" / "tests").glob("*.yaml"))
    assert shipped == TEST_FILES
    smallest = min((share / "rules" / "tests").glob("*.yaml"), key=lambda p: p.stat().st_size)
    tested = run(installed, "-m", "msdoctor", "rules", "test", str(smallest))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert " passed, 0 failed" in tested.stdout + tested.stderr
    assert (share / "rules" / "prometheus" / "msdoctor-fleet.rules.yml").is_file()
    assert sorted(p.name for p in (share / "grafana" / "dashboards").glob("*.json")) == \
        ["msdoctor-fleet.json", "msdoctor-rank.json"]


def test_the_wheel_marks_both_packages_as_typed(installed):
    done = run(installed, "-c", "import msdoctor, trainer_hooks; print(msdoctor.__file__); "
                                "print(trainer_hooks.__file__)")
    assert done.returncode == 0, done.stderr
    for init in done.stdout.split():
        assert (Path(init).parent / "py.typed").is_file(), init

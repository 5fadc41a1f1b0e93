"""Process-wide settings for the test session.

MindSpore sets ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` when it is imported (its
generated protobuf modules need the pure-Python runtime); once another package has loaded
protobuf with its default C runtime, importing MindSpore fails ("Descriptors cannot be
created directly"). The replay tests load TensorBoard (protobuf) in this process and other
tests import MindSpore later, so the session chooses MindSpore's setting before either.
"""
import os

import pytest

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")


#: the trainer test files that share most of the session's real runs
SHARED_RUN_FILES = ("test_faults.py", "test_rules.py", "test_training.py")
#: runs of those files long enough for a worker group of their own: run -> the tests that read
#: it besides those parametrized with ``run`` (the long pair is "long" and "clean-long")
OWN_GROUP_RUNS = {
    "long": ("test_leak_grows_host_memory_every_step",
             "test_lr_high_runs_30x_the_learning_rate_and_ends_above_the_clean_loss",
             "test_lr_high_makes_the_loss_oscillate",
             "test_the_long_clean_run_fires_no_warning_or_critical_alert"),
    "plateau": (),
    "two-ranks": ("test_the_ranks_of_one_launch_share_a_run_id_and_each_keeps_its_own_spool_and_shard",
                  "test_a_second_launch_into_the_same_directory_is_refused_by_every_rank",
                  "test_the_slow_rank_of_a_two_rank_launch_fires_straggler_rank_on_that_rank_only"),
}
#: the longest worker groups, longest first (CI seconds: ~700, 500, 250, 210, 110); they are
#: handed out first (``make test`` keeps the collection order: ``--no-loadscope-reorder``), so
#: none of them starts late and becomes the suite's tail
FIRST_GROUPS = ("trainer-runs", "trainer-runs-more", "trainer-run-long", "trainer-run-two-ranks",
                "trainer-run-plateau")


def _group(path: str, item: object) -> str:
    """The worker group of a test under ``pytest -n`` (``--dist loadgroup``): tests sharing a
    costly session fixture stay in one worker (the real trainer runs of ``tests/trainer_hooks/
    trainer``, the runs of ``OWN_GROUP_RUNS`` each in a group of its own; the toy networks of
    the rest of ``tests/trainer_hooks``), every other file is a group of its own, so a module
    fixture is built once."""
    parts = path.replace(os.sep, "/").split("/")
    if parts[:3] == ["tests", "trainer_hooks", "trainer"]:
        if parts[-1] not in SHARED_RUN_FILES:
            return "trainer-runs-more"   # shares two short runs with the files below
        callspec = getattr(item, "callspec", None)
        run = callspec.params.get("run") if callspec is not None else None
        name = getattr(item, "originalname", None)
        for own, readers in OWN_GROUP_RUNS.items():
            if run == own or name in readers:
                return f"trainer-run-{own}"
        return "trainer-runs"
    if parts[:2] == ["tests", "trainer_hooks"]:
        return "trainer-toys"
    return "/".join(parts)


@pytest.hookimpl(tryfirst=True)      # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return

    root = str(config.rootpath)
    groups = {}
    for item in items:
        groups[item] = _group(os.path.relpath(str(item.path), root), item)
        item.add_marker(pytest.mark.xdist_group(name=groups[item]))
    rank = {name: k for k, name in enumerate(FIRST_GROUPS)}
    items.sort(key=lambda item: rank.get(groups[item], len(rank)))      # stable: else as found

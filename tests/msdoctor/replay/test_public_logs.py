"""The labelled corpus of real public training logs (tests/data/public_logs): complete, reproducible
from its excerpts, and readable by the replay readers. Detection targets are not asserted here;
tests/bench/bench_public_logs.py measures them."""
from __future__ import annotations

import csv
import importlib.util
import re
import shutil
import subprocess
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest
import yaml

from msdoctor.core.engine.loader import default_rules_dir, load_rules
from msdoctor.replay.driver import load

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "tests" / "data" / "public_logs"
SCRIPT = CORPUS / "convert.py"
MINDSPORE_FAMILY = ("mindspore", "mindformers")


def _convert_module():
    spec = importlib.util.spec_from_file_location("public_logs_convert", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


convert = _convert_module()
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text(encoding="utf-8"))
LABELS = MANIFEST["labels"]
LOGS = MANIFEST["logs"]
IDS = [e["id"] for e in LOGS]


@pytest.fixture(scope="module")
def alert_names():
    return {rule.alert for rule in load_rules([str(default_rules_dir())])}


def test_the_corpus_holds_thirty_logs_from_eight_frameworks_including_mindspore_and_mindformers():
    frameworks = {e["framework"] for e in LOGS}
    assert len(LOGS) >= 30 and len(frameworks) >= 8
    assert "mindformers" in frameworks and "mindspore" in frameworks
    assert sum(e["framework"] in MINDSPORE_FAMILY for e in LOGS) >= 4
    labels = [e["label"] for e in LOGS]
    assert labels.count("healthy") >= 10 and len(labels) - labels.count("healthy") >= 10


def test_log_ids_are_unique_and_name_their_files():
    assert len(set(IDS)) == len(IDS)
    on_disk = {p.stem for p in CORPUS.glob("*.txt")} | {p.stem for p in CORPUS.glob("*.csv")}
    assert on_disk == set(IDS), "every .txt/.csv belongs to a manifest entry and vice versa"


def test_every_label_names_alerts_the_shipped_rules_define(alert_names):
    for label, alerts in LABELS.items():
        assert set(alerts) <= alert_names, f"label {label}: unknown alerts {set(alerts) - alert_names}"


@pytest.mark.parametrize("entry", LOGS, ids=IDS)
def test_each_log_has_a_source_a_framework_a_label_and_a_first_problem_step_when_sick(entry, alert_names):
    pinned = (r"https://github\.com/[\w.-]+/[\w.-]+/(issues/\d+|pull/\d+|blob/[0-9a-f]{40}/\S+)$"
              r"|https://huggingface\.co/[\w.-]+/[\w.-]+/(blob|commit)/[0-9a-f]{40}(/\S+)?$")
    if entry.get("source_pinned") is False:     # a web page: its excerpt is the only fixed copy
        assert re.match(r"https://\S+$", entry["source"]) and not re.match(pinned, entry["source"])
    else:
        assert re.match(pinned, entry["source"]), entry["source"]
    assert entry["framework"] and entry["notes"]
    assert entry["label"] == "healthy" or entry["label"] in LABELS
    if entry["label"] == "healthy":
        assert entry["first_problem_step"] is None and not entry["expected_alerts"]
    else:
        assert isinstance(entry["first_problem_step"], int)
        assert entry["expected_alerts"] and set(entry["expected_alerts"]) <= alert_names
    assert entry["parser"] in convert.PARSERS
    assert (CORPUS / f"{entry['id']}.txt").stat().st_size > 0
    assert entry.get("replay_reads_txt") in (None, "mindformers", "mindspore")


@pytest.mark.parametrize("entry", LOGS, ids=IDS)
def test_each_step_table_is_rebuilt_byte_for_byte_from_its_excerpt(entry):
    rebuilt = convert.rebuild(entry)
    assert (CORPUS / f"{entry['id']}.csv").read_bytes() == rebuilt.encode("utf-8")
    assert rebuilt.count("\n") - 1 == entry["records"] > 0
    if entry["label"] != "healthy":
        steps = [int(line.split(",")[0]) for line in rebuilt.splitlines()[1:]]
        assert entry["first_problem_step"] in steps


def _printed_numbers(text):
    """Every number printed in ``text``, as exact decimals: read as printed and with thousands
    separators dropped (a comma between CSV fields can look like one: ``6.87,961.64``)."""
    numbers = set()
    plain = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    for version in (text, plain):
        for token in re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", version):
            try:
                numbers.add(Decimal(token))
            except InvalidOperation:
                pass
    return numbers


#: Columns a parser computes rather than copies (convert.py's docstring), with what they must be:
#: MaxwellNet's epoch time is the difference of two time stamps printed in whole seconds; a
#: train_gpt.py log's step time that of two cumulative training times over their steps.
COMPUTED = {("maxwellnet_train_epoch", "step_time_s"): lambda v: v.isdigit(),
            ("train_gpt_step_interval_time", "step_time_s"): lambda v: Decimal(v) >= 0}


@pytest.mark.parametrize("entry", LOGS, ids=IDS)
def test_every_value_in_a_step_table_is_printed_in_its_excerpt(entry):
    text = (CORPUS / f"{entry['id']}.txt").read_text(encoding="utf-8")
    printed = _printed_numbers(text)
    with open(CORPUS / f"{entry['id']}.csv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            for column, value in row.items():
                if column in ("step", "overflow") or value == "":
                    continue
                computed = COMPUTED.get((entry["parser"], column))
                if computed is not None:
                    assert computed(value), f"{entry['id']} step {row['step']}: {column}={value}"
                    continue
                if value in ("nan", "inf", "-inf"):
                    assert value.lstrip("-") in text.lower(), f"{column}={value}"
                    continue
                number = Decimal(value)
                # times may be printed in ms or (a per-step diagnostics table) in microseconds
                shifts = (1, 1000, 1000000) if column in ("step_time_s", "data_wait_s") else (1,)
                assert any(number * k in printed for k in shifts), \
                    f"{entry['id']} step {row['step']}: {column}={value} is not printed in the excerpt"


def test_the_conversion_script_flags_a_step_table_that_no_longer_matches_its_excerpt(tmp_path):
    copy = tmp_path / "public_logs"
    shutil.copytree(CORPUS, copy)
    run = [sys.executable, str(SCRIPT), "--check", "--corpus", str(copy)]
    assert subprocess.run(run, capture_output=True, text=True, timeout=120).returncode == 0
    table = copy / "nanogpt_shakespeare_char_nan.csv"
    table.write_text(table.read_text().replace("425,nan", "425,3.31", 1))
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "nanogpt_shakespeare_char_nan" in done.stderr


@pytest.mark.parametrize("entry", LOGS, ids=IDS)
def test_replay_reads_each_step_table_without_errors(entry):
    recording = load([str(CORPUS / f"{entry['id']}.csv")], progress=False)
    assert recording.format == "csv" and recording.problems.count == 0
    assert sum(len(b.steps) for log in recording.ranks.values() for b in log.blocks) == entry["records"]


@pytest.mark.parametrize("entry", [e for e in LOGS if e.get("replay_reads_txt")],
                         ids=[e["id"] for e in LOGS if e.get("replay_reads_txt")])
def test_the_original_text_read_by_its_own_reader_gives_the_steps_and_losses_of_the_table(entry):
    def steps_and_losses(path, fmt):
        recording = load([str(path)], fmt=fmt, progress=False)
        (log,) = recording.ranks.values()
        steps = [int(s) for b in log.blocks for s in b.steps]
        losses = [float(x) for b in log.blocks for x in b.columns["loss"][0]]
        return steps, losses

    text = steps_and_losses(CORPUS / f"{entry['id']}.txt", entry["replay_reads_txt"])
    table = steps_and_losses(CORPUS / f"{entry['id']}.csv", "csv")
    assert text == table

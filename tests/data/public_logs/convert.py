"""Rebuild the step tables (``<id>.csv``) of the public-log corpus from the raw excerpts (``<id>.txt``).

Each manifest entry names a ``parser``: one of :data:`PARSERS` (``log_parsing.py``; the parsers are
in ``log_parsers.py``, ``log_parsers_more.py``, ``log_parsers_progress.py``, ``log_parsers_extra.py``,
``log_parsers_mindspore.py``, ``log_parsers_collected.py``, ``log_parsers_harvested.py``,
``log_parsers_gathered.py``, ``log_parsers_assembled.py``, ``log_parsers_sourced.py``,
``log_parsers_located.py``, ``log_parsers_mined.py``, ``log_parsers_culled.py``, ``log_parsers_drawn.py``,
``log_parsers_dredged.py``, ``log_parsers_sifted.py``,
``log_parsers_scanned.py``, ``log_parsers_picked.py``, ``log_parsers_sampled.py``,
``log_parsers_threaded.py``, ``log_parsers_fetched.py``, ``log_parsers_withheld.py``,
``log_parsers_trawled.py``, ``log_parsers_gleaned.py``, ``log_parsers_combed.py``,
``log_parsers_panned.py``, ``log_parsers_threshed.py``, ``log_parsers_winnowed.py``,
``log_parsers_garnered.py``, ``log_parsers_foraged.py``, ``log_parsers_reaped.py``,
``log_parsers_scooped.py``, ``log_parsers_netted.py``, ``log_parsers_hauled.py``,
``log_parsers_skimmed.py``, ``log_parsers_trapped.py``, ``log_parsers_shoveled.py`` and
``log_parsers_sieved.py``), a
function
from the excerpt's text to rows (dicts of column -> text).
Values are copied as printed; the only changes are dropping thousands separators, spelling
non-finite values ``nan``/``inf``/``-inf``, milli- and microseconds -> seconds (exact decimal shifts) and
``overflow`` flags as ``1``/``0``; two parsers compute a step time: ``maxwellnet_train_epoch`` as the
difference of two printed time stamps, ``train_gpt_step_interval_time`` as that of two printed
cumulative training times over their steps. Steps are computed only where
the manifest notes say so (global step from epoch and in-epoch step, or a running record count).

    python tests/data/public_logs/convert.py            # rewrite every CSV
    python tests/data/public_logs/convert.py --check    # exit 1 if a CSV differs from its rebuild
    python tests/data/public_logs/convert.py ID ...     # only these logs
    python tests/data/public_logs/convert.py --check --corpus DIR   # another copy of the corpus

Nothing in the excerpts is executed: JSON is parsed with ``json``, everything else with regexes.
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path
from typing import Dict, List, Optional

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))           # the parser modules beside this script

import log_parsers  # noqa: E402,F401  (registers its parsers)
import log_parsers_assembled  # noqa: E402,F401  (registers its parsers)
import log_parsers_collected  # noqa: E402,F401  (registers its parsers)
import log_parsers_combed  # noqa: E402,F401  (registers its parsers)
import log_parsers_culled  # noqa: E402,F401  (registers its parsers)
import log_parsers_drawn  # noqa: E402,F401  (registers its parsers)
import log_parsers_dredged  # noqa: E402,F401  (registers its parsers)
import log_parsers_extra  # noqa: E402,F401  (registers its parsers)
import log_parsers_fetched  # noqa: E402,F401  (registers its parsers)
import log_parsers_foraged  # noqa: E402,F401  (registers its parsers)
import log_parsers_garnered  # noqa: E402,F401  (registers its parsers)
import log_parsers_gathered  # noqa: E402,F401  (registers its parsers)
import log_parsers_gleaned  # noqa: E402,F401  (registers its parsers)
import log_parsers_harvested  # noqa: E402,F401  (registers its parsers)
import log_parsers_hauled  # noqa: E402,F401  (registers its parsers)
import log_parsers_located  # noqa: E402,F401  (registers its parsers)
import log_parsers_mindspore  # noqa: E402,F401  (registers its parsers)
import log_parsers_mined  # noqa: E402,F401  (registers its parsers)
import log_parsers_more  # noqa: E402,F401  (registers its parsers)
import log_parsers_netted  # noqa: E402,F401  (registers its parsers)
import log_parsers_panned  # noqa: E402,F401  (registers its parsers)
import log_parsers_picked  # noqa: E402,F401  (registers its parsers)
import log_parsers_progress  # noqa: E402,F401  (registers its parsers)
import log_parsers_reaped  # noqa: E402,F401  (registers its parsers)
import log_parsers_sampled  # noqa: E402,F401  (registers its parsers)
import log_parsers_scanned  # noqa: E402,F401  (registers its parsers)
import log_parsers_scooped  # noqa: E402,F401  (registers its parsers)
import log_parsers_shoveled  # noqa: E402,F401  (registers its parsers)
import log_parsers_sieved  # noqa: E402,F401  (registers its parsers)
import log_parsers_sifted  # noqa: E402,F401  (registers its parsers)
import log_parsers_skimmed  # noqa: E402,F401  (registers its parsers)
import log_parsers_sourced  # noqa: E402,F401  (registers its parsers)
import log_parsers_threaded  # noqa: E402,F401  (registers its parsers)
import log_parsers_threshed  # noqa: E402,F401  (registers its parsers)
import log_parsers_trapped  # noqa: E402,F401  (registers its parsers)
import log_parsers_trawled  # noqa: E402,F401  (registers its parsers)
import log_parsers_winnowed  # noqa: E402,F401  (registers its parsers)
import log_parsers_withheld  # noqa: E402,F401  (registers its parsers)
from log_parsing import PARSERS, Row  # noqa: E402

MANIFEST = HERE / "manifest.yaml"
#: Columns in the order they are written; a CSV has only those its log carries.
COLUMNS = ("step", "loss", "grad_norm", "lr", "loss_scale", "overflow", "step_time_s",
           "tokens_per_s", "epoch", "data_wait_s")


def to_csv(rows: List[Row]) -> str:
    columns = [c for c in COLUMNS if any(c in r for r in rows)]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in columns})
    return out.getvalue()


def load_manifest(path: Path = MANIFEST) -> Dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def rebuild(entry: Dict, directory: Path = HERE) -> str:
    """The CSV text of one manifest entry, rebuilt from its excerpt."""
    if entry.get("parser") not in PARSERS:
        raise ValueError(f"{entry.get('id')}: unknown parser {entry.get('parser')!r}; "
                         f"expected one of {', '.join(sorted(PARSERS))}")
    with open(directory / f"{entry['id']}.txt", encoding="utf-8", newline="") as handle:
        text = handle.read()
    return to_csv(PARSERS[entry["parser"]](text))


def main(argv: Optional[List[str]] = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("ids", nargs="*", help="only these logs (default: all)")
    args.add_argument("--check", action="store_true", help="compare, do not write")
    args.add_argument("--corpus", type=Path, default=HERE, help="corpus directory (default: this one)")
    opts = args.parse_args(argv)
    entries = [e for e in load_manifest(opts.corpus / "manifest.yaml")["logs"]
               if not opts.ids or e["id"] in opts.ids]
    differing = []
    for entry in entries:
        text = rebuild(entry, opts.corpus)
        target = opts.corpus / f"{entry['id']}.csv"
        if opts.check:
            if not target.exists() or target.read_bytes() != text.encode("utf-8"):
                differing.append(entry["id"])
        else:
            target.write_bytes(text.encode("utf-8"))
        print(f"{entry['id']}: {text.count(chr(10)) - 1} records")
    if differing:
        print("differ from their rebuild: " + ", ".join(differing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

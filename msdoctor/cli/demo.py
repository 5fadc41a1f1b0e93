"""``msdoctor demo``: the whole loop on a real run, in one command.

Starts the real sidecar (``msdoctor serve``), trains the bundled model (or, where
the trainer is absent, the toy network) with the hooks on and a fault injected,
prints each alert with its fix as the sidecar raises it, and ends with a summary.
Training runs in its own process: this one never imports MindSpore.
"""
from __future__ import annotations

import argparse
import importlib.util
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Dict, List, Optional

from msdoctor.core import format as fmt
from msdoctor.core.alerts.feed import AlertFeed
from msdoctor.core.pipeline import Pipeline
from msdoctor.wire.layout import alerts_file

HELP = "Train a small real model with the hooks on and a fault injected; print the alerts and fixes."

#: What the default demo injects: a loss spike, then stalled updates, then a non-finite loss.
DEFAULT_INJECT = "spike@230,stall@250,nan@400"
DEFAULT_STEPS = 410


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="where the run is written (default: runs/demo-<time>)")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, metavar="N",
                        help=f"optimizer steps to train (default: {DEFAULT_STEPS})")
    parser.add_argument("--inject", default=DEFAULT_INJECT, metavar="SPEC",
                        help=f"faults to inject, see `msdoctor train --help` (default: {DEFAULT_INJECT})")
    parser.add_argument("--listen", default=None, metavar="HOST:PORT",
                        help="sidecar address (default: 127.0.0.1:9089, or a free port if taken)")


def _free_listen(preferred: int = 9089) -> str:
    for port in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return f"127.0.0.1:{sock.getsockname()[1]}"
    raise RuntimeError("no free loopback port")


def _trainer_command(run_dir: Path, steps: int, inject: str) -> List[str]:
    if importlib.util.find_spec("trainer_hooks.trainer") is not None:
        command = [sys.executable, "-m", "trainer_hooks.trainer", "--preset", "tiny",
                   "--steps", str(steps), "--run-dir", str(run_dir)]
        return command + (["--inject", inject] if inject else [])
    return [sys.executable, "-m", "trainer_hooks.toy", "--run-dir", str(run_dir),
            "--steps", str(steps), "--loss-scale", "--inject-nan-at", str(max(2, steps - 10))]


class AlertPrinter:
    """Listens to the sidecar's alert journal: prints firing alerts with cause and fix."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.fired: Dict[str, dict] = {}

    def on_alert(self, alert: Dict[str, Any]) -> None:
        state, name = alert.get("state"), alert.get("alert", "?")
        where = f"rank {alert.get('rank')} step {alert.get('step')}"
        if state == "firing" and alert.get("caused_by"):
            self.out.write(f"  [{str(alert.get('severity', '')).upper()}] {name} ({where}) "
                           f"{fmt.consequence(alert['caused_by'])}\n")
        elif state == "firing":
            self.fired.setdefault(name, alert)
            severity = str(alert.get("severity", "")).upper()
            self.out.write(f"\n  [{severity}] {name} ({where})\n    {alert.get('summary', '')}\n"
                           f"    cause: {alert.get('cause', '')}\n    fix:   {alert.get('fix', '')}\n")
        elif state == "resolved":
            self.out.write(f"  [resolved] {name} ({where})\n")
        self.out.flush()


def _progress(pipeline: Pipeline) -> Optional[str]:
    """One line about rank 0's newest step, as the pipeline has read it so far."""
    pipeline.poll_once()
    store = pipeline.store
    for _run, rank, state in (store.ranks() if store is not None else []):
        if rank == 0 and state.last_step is not None:
            latest = state.latest.get
            return (f"  step {state.last_step:>5}  loss {fmt.number(latest('loss')):>8}  "
                    f"{fmt.rate(latest('tokens_per_s'))} tokens/s")
    return None


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    run_dir = args.run_dir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    listen = args.listen or _free_listen()
    sidecar_log = open(run_dir / "sidecar.log", "w")
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(run_dir), "--listen", listen,
         "--poll", "0.2"], stdout=sidecar_log, stderr=subprocess.STDOUT)
    out.write(f"msdoctor demo\n  run dir:    {run_dir}\n"
              f"  sidecar:    http://{listen}/metrics (Prometheus), http://{listen}/api/v1 "
              f"(log: {run_dir / 'sidecar.log'})\n"
              f"  attach:     msdoctor tui http://{listen}   (or: msdoctor tui --run-dir {run_dir})\n"
              f"  injecting:  {args.inject or 'nothing'}\n\n")
    out.flush()
    printer = AlertPrinter(out)
    feed = AlertFeed(alerts_file(run_dir), listeners=[printer])
    spool = Pipeline(run_dir, persist=False)
    train_log = open(run_dir / "train.log", "w")
    trainer = subprocess.Popen(_trainer_command(run_dir, args.steps, args.inject),
                               stdout=train_log, stderr=subprocess.STDOUT)
    last_progress = 0.0
    try:
        while trainer.poll() is None:
            feed.poll()
            if time.monotonic() - last_progress > 5:
                line = _progress(spool)
                if line:
                    out.write(line + "\n")
                    out.flush()
                last_progress = time.monotonic()
            time.sleep(0.3)
        time.sleep(2.0)   # let the sidecar read the last lines
        feed.poll()
    except KeyboardInterrupt:
        trainer.send_signal(signal.SIGINT)
        trainer.wait(timeout=30)
    finally:
        sidecar.send_signal(signal.SIGTERM)
        try:
            sidecar.wait(timeout=15)
        except subprocess.TimeoutExpired:
            sidecar.kill()
        sidecar_log.close()
        train_log.close()
    return _summary(out, run_dir, trainer.returncode, printer, _progress(spool))


def _summary(out: IO[str], run_dir: Path, code: Optional[int], printer: AlertPrinter,
             last: Optional[str]) -> int:
    out.write("\n" + "-" * 72 + "\n")
    out.write(f"training exited with status {code} (log: {run_dir / 'train.log'})\n")
    if last:
        out.write(f"last step:{last}\n")
    if printer.fired:
        out.write(f"{len(printer.fired)} alert(s) fired:\n")
        for name, alert in printer.fired.items():
            out.write(f"  {name:<26} first at step {alert.get('first_step', alert.get('step'))}: "
                      f"{alert.get('fix', '')}\n")
    else:
        out.write("no alert fired\n")
    out.write(f"\nNext: msdoctor status --run-dir {run_dir}\n"
              f"      msdoctor replay {run_dir}\n"
              f"      msdoctor tui --run-dir {run_dir}\n")
    out.flush()
    return 0 if printer.fired else 1   # a demo that shows no alert has failed to demonstrate

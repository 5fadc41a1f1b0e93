"""``msdoctor demo``: the whole loop on a real run, in one command.

Starts the real sidecar (``msdoctor serve``), trains the bundled model (or, where
the trainer is absent, the toy network) with the hooks on and a fault injected,
prints each alert with its fix as the sidecar raises it, and ends with a summary.
Training runs in its own process: this one never imports MindSpore.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Dict, List, Optional

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
                        help="sidecar address (default: 127.0.0.1:9400, or a free port if taken)")


def _free_listen(preferred: int = 9400) -> str:
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
    """Prints new lines of ``alerts.jsonl`` as they appear: firing alerts with cause and fix."""

    def __init__(self, path: Path, out: IO[str]) -> None:
        self.path, self.out, self.offset = path, out, 0
        self.fired: Dict[str, dict] = {}

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            try:
                alert = json.loads(line)
            except ValueError:
                continue
            self._show(alert)

    def _show(self, alert: dict) -> None:
        state, name = alert.get("state"), alert.get("alert", "?")
        where = f"rank {alert.get('rank')} step {alert.get('step')}"
        if state == "firing":
            self.fired.setdefault(name, alert)
            severity = str(alert.get("severity", "")).upper()
            self.out.write(f"\n  [{severity}] {name} ({where})\n    {alert.get('summary', '')}\n"
                           f"    cause: {alert.get('cause', '')}\n    fix:   {alert.get('fix', '')}\n")
        elif state == "resolved":
            self.out.write(f"  [resolved] {name} ({where})\n")
        self.out.flush()


def _progress(run_dir: Path) -> Optional[str]:
    """One line about the newest step of rank 0's spool (a cheap read of the file's tail)."""
    path = run_dir / "events" / "rank-0.jsonl"
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - 8192))
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") == "step":
            tps = event.get("tokens", 0) / event["step_time_s"] if event.get("step_time_s") else 0
            return f"  step {event['step']:>5}  loss {event.get('loss')!s:>8.8}  {tps:,.0f} tokens/s"
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
    printer = AlertPrinter(run_dir / "alerts.jsonl", out)
    train_log = open(run_dir / "train.log", "w")
    trainer = subprocess.Popen(_trainer_command(run_dir, args.steps, args.inject),
                               stdout=train_log, stderr=subprocess.STDOUT)
    last_progress = 0.0
    try:
        while trainer.poll() is None:
            printer.poll()
            if time.monotonic() - last_progress > 5:
                line = _progress(run_dir)
                if line:
                    out.write(line + "\n")
                    out.flush()
                last_progress = time.monotonic()
            time.sleep(0.3)
        time.sleep(2.0)   # let the sidecar read the last lines
        printer.poll()
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
    return _summary(out, run_dir, trainer.returncode, printer, listen)


def _summary(out: IO[str], run_dir: Path, code: Optional[int], printer: AlertPrinter,
             listen: str) -> int:
    out.write("\n" + "-" * 72 + "\n")
    out.write(f"training exited with status {code} (log: {run_dir / 'train.log'})\n")
    last = _progress(run_dir)
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

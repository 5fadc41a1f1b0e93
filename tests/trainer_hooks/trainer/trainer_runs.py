"""Helpers of the trainer tests: run the real trainer in its own process, read its spool.

Runs are session-scoped and started lazily (see ``conftest.py``), so the spool-level tests and
the rule-level tests of one fault share one process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from goodput_truth import note_launch, truth_file

ROOT = Path(__file__).resolve().parents[3]


def command(run_dir: Path, cache: Path, *argv: str) -> List[str]:
    return [sys.executable, "-m", "trainer_hooks.trainer", "--run-dir", str(run_dir),
            "--data-dir", str(cache), "--log-every", "1000", *argv]


def train(run_dir: Path, cache: Path, *argv: str, timeout: float = 300,
          fails: bool = False) -> subprocess.CompletedProcess:
    """Run the trainer to completion in its own process (cwd: a scratch dir); with ``fails``,
    expect it to end in an error. With ``--truth``, the launch is noted in the truth file."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), GLOG_v="3")
    if "--truth" in argv:
        note_launch(run_dir)
    done = subprocess.run(command(run_dir, cache, *argv), cwd=str(run_dir.parent), env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert (done.returncode != 0) == fails, \
        f"trainer ended with {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def memory_cgroup(limit: int) -> Path:
    """A new memory cgroup (v1, or v2 where the memory controller is delegated) limited to
    ``limit`` bytes; ``pytest.skip`` where this machine does not let us make one."""
    import pytest

    name = f"msdoctor-test-{os.getpid()}-{limit}"
    for base, knob in ((Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
                       (Path("/sys/fs/cgroup"), "memory.max")):
        if not (base / knob).exists() and not (base / "cgroup.procs").exists():
            continue
        group = base / name
        try:
            group.mkdir(exist_ok=True)
            (group / knob).write_text(str(limit))
            return group
        except OSError:
            try:
                group.rmdir()
            except OSError:
                pass
    pytest.skip("cannot create a memory cgroup here (needs cgroup v1 memory or a delegated v2 "
                "memory controller, and root)")


def train_in_cgroup(run_dir: Path, cache: Path, limit: int, *argv: str,
                    timeout: float = 300) -> int:
    """Train inside a memory cgroup of ``limit`` bytes, as in a container with a memory limit;
    the exit status (the kernel's OOM killer may end the run: -9)."""
    group = memory_cgroup(limit)
    procs = group / "cgroup.procs"

    def enter() -> None:                  # in the child, before exec: join the cgroup
        procs.write_text(str(os.getpid()))

    env = dict(os.environ, PYTHONPATH=str(ROOT), GLOG_v="3")
    try:
        done = subprocess.run(command(run_dir, cache, *argv), cwd=str(run_dir.parent), env=env,
                              capture_output=True, text=True, timeout=timeout, preexec_fn=enter)
    finally:
        try:
            group.rmdir()
        except OSError:
            pass
    return done.returncode


def train_ranks(run_dir: Path, cache: Path, *per_rank: Sequence[str], timeout: float = 300,
                until_last: bool = False) -> List[str]:
    """One trainer process per rank (RANK_ID/RANK_SIZE, as a launcher sets them) into one run
    directory, at the same time; returns each rank's stderr. With ``until_last``, the other
    ranks are stopped (the stop file) once the last rank has ended, their ``--steps`` only a
    bound: they train side by side with it for as long as it trains, as a job's ranks do."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    procs = []
    for rank, argv in enumerate(per_rank):
        env = dict(os.environ, PYTHONPATH=str(ROOT), GLOG_v="3", RANK_ID=str(rank),
                   RANK_SIZE=str(len(per_rank)))
        procs.append(subprocess.Popen(command(run_dir, cache, *argv), cwd=str(run_dir.parent),
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True))
    last = procs[-1].communicate(timeout=timeout)[1]
    if until_last:
        stop = run_dir / "control" / "stop.json"
        stop.parent.mkdir(exist_ok=True)
        stop.write_text(json.dumps({"reason": "test: the last rank has ended"}))
    errs = [p.communicate(timeout=timeout)[1] for p in procs[:-1]] + [last]
    for rank, (p, err) in enumerate(zip(procs, errs)):
        assert p.returncode == 0, f"rank {rank} failed ({p.returncode}):\n{err[-3000:]}"
    return errs


def msrun_log(run_dir: Path) -> Path:
    """Where :func:`train_msrun` has msrun write the workers' logs (``--log_dir``)."""
    return run_dir.parent / f"{run_dir.name}-output" / "msrun_log"


def train_msrun(run_dir: Path, cache: Path, log_dir: Path, *argv: str, workers: int = 2,
                timeout: float = 600) -> None:
    """Launch the trainer with MindSpore's ``msrun`` (a scheduler and ``workers`` workers on
    this host, joined in its CPU cluster), as MindFormers jobs are launched."""
    from tests.servers import free_port

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PYTHONPATH=str(ROOT), GLOG_v="3",
               PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    script = ROOT / "trainer_hooks" / "trainer" / "__main__.py"
    cmd = [sys.executable, "-m", "mindspore.parallel.cluster.run", f"--worker_num={workers}",
           f"--local_worker_num={workers}", f"--master_port={free_port()}",
           f"--log_dir={log_dir}", "--join=True", str(script),
           *command(run_dir, cache, *argv)[3:]]
    done = subprocess.run(cmd, cwd=str(run_dir.parent), env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"msrun failed ({done.returncode}):\n{done.stdout[-3000:]}"


def events(run_dir: Path, rank: int = 0) -> List[Dict]:
    lines = (run_dir / "events" / f"rank-{rank}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def steps(run_dir: Path) -> List[Dict]:
    return [e for e in events(run_dir) if e["type"] == "step"]


def value(event: Dict, name: str) -> float:
    """A numeric field, with the wire's "nan"/"inf" strings turned back into floats."""
    return float(event[name])


#: Steps of the long pair of runs (micro-batch 4): lr-high's GradNormSpikesRecurring fires at
#: its 4th separate spike within 500 steps (step 193 on this seed), MemoryGrowth on leak@1 at 81.
LONG = 600
#: The schedule (warm-up, cosine) both long runs keep: the one these seeds were measured on;
#: ``--stop-after`` ends them at step ``LONG``, their first steps those of the full schedule.
LONG_SCHEDULE = 1450


#: seconds a run may take before it counts as stuck: a liveness bound, far above a loaded
#: machine's time for the longest run (1000 steps at ~0.6 s a step under load ~10)
LIVENESS = 1500


class Runs:
    """Starts each named run once per session; returns its run directory.

    Faults share a run only where their rules cannot mistake one for the other (spike and
    slow-data: a loss spike vs input waits; lr-high and leak: the loss vs host memory).
    """

    SPECS = {
        # name: trainer options
        "clean": ("--steps", "200", "--save-every", "50", "--keep", "3"),
        "half": ("--steps", "200", "--save-every", "50", "--stop-after", "100"),
        "clean-long": ("--steps", str(LONG_SCHEDULE), "--stop-after", str(LONG),
                       "--micro-batch", "4", "--save-every", "10000"),
        "long": ("--steps", str(LONG_SCHEDULE), "--stop-after", str(LONG), "--micro-batch", "4",
                 "--save-every", "10000", "--inject", "lr-high,leak@1"),
        "nan": ("--steps", "40", "--save-every", "10", "--inject", "nan@30"),
        "spike-slow": ("--steps", "230", "--inject", "spike@210,slow-data@150"),
        # also declares ~10x the CPU's throughput: ThroughputBelowBaseline (a timing alert, which
        # no rule of a stall takes for its cause or consequence) rides on this run
        "stall": ("--steps", "170", "--inject", "stall@60", "--expect-tokens-per-s", "100000"),
        # LossSpikesPeriodic fires on the third spike (150); five periods in all (the schedule of
        # 360 steps it was measured on)
        "periodic": ("--steps", "360", "--stop-after", "260", "--inject", "periodic@50"),
        # JobHung is judged on the clock while the run is alive: a live sidecar watches this one
        "hang": ("--steps", "30", "--inject", "hang@20", "--hang-timeout", "10",
                 "--hang-after-s", "3", "--heartbeat-s", "0.5"),
        "accum": ("--steps", "12", "--inject", "accum-mismatch", "--grad-accum", "4"),
        "scale-low": ("--steps", "240", "--inject", "loss-scale-low", "--save-every", "10000"),
        # beyond the faults: more rules on real runs
        "nan-fp16": ("--steps", "60", "--precision", "fp16", "--inject", "nan@30"),
        # per-layer faults: each pinned on its block (frozen block 0 also gets the NaN)
        # weights initialised at 50x their scale: the first loss far above ln(vocab size) (20 vs 7.6)
        "init-hot": ("--steps", "2", "--inject", "init-scale@50"),
        "layers": ("--steps", "36", "--inject", "grad-layer@30:1,nan-layer@22:0,frozen-layer:0"),
        # updates stalled at 200: the loss stops following the power law it fell along
        # (micro-batch 4: a loss steady enough to call flat, at half the cost of a step of 8)
        "plateau": ("--steps", "750", "--inject", "stall@200", "--micro-batch", "4",
                    "--save-every", "10000"),
        # garbage data from step 30 and a 4 s hang at 42; LossSpike rolls back (its own rules)
        "rollback": ("--steps", "50", "--save-every", "10", "--inject", "bad-data@30:5,hang@42",
                     "--hang-timeout", "4", "--heartbeat-s", "0.5"),
    }
    #: a crash (step 34) and a restart 2 s later with --resume from the checkpoint of 30; a slow
    #: data window, a hang, evaluations and saves before it (the goodput test's run)
    RESTARTS = {
        "goodput": (("--steps", "40", "--save-every", "10", "--eval-every", "15",
                     "--eval-batches", "2", "--inject", "slow-data@400:3-7,hang@24,crash@34",
                     "--hang-timeout", "4"),
                    ("--steps", "40", "--save-every", "10", "--eval-every", "15",
                     "--eval-batches", "2", "--resume"), 2.0),
    }
    #: runs whose trainer keeps its own account of its time (``--truth``, beside the run)
    TRUTH = ("rollback", "goodput")
    #: runs whose harness writes a control file once a checkpoint exists: (step, file, content)
    CONTROL_AT = {"rollback": (20, "lr.json", {"factor": 0.5, "reason": "test: lower the LR "
                                                                        "after the save of 20"})}
    WITH_SIDECAR = ("hang", "rollback")
    #: runs whose sidecar reads the shipped rules with one rule's action changed
    RULE_ACTIONS = {"rollback": ("LossSpike", "rollback")}
    #: runs inside a memory cgroup (a container's memory limit): (limit in bytes, options).
    #: 8 MB a step leaked from ~0.9 GiB: 90 % of 1.5 GiB near step 60, the OOM killer later
    IN_CGROUP = {
        "oom": (1536 << 20, ("--steps", "400", "--inject", "leak@8", "--save-every", "10000")),
    }
    #: runs of several ranks at once (one process each): per-rank options
    RANKS = {
        # rank 1's loader sleeps 200 ms a batch, at least 2x its compute: a straggler from step 1.
        # (100 ms failed once in CI at a load of ~5, with several benchmarks sharing the 2 cores:
        # rank 0's compute grew to ~the floor while rank 1 slept, so its median fell below
        # StragglerRank's 1.15x for a moment and the 200-step 'for' restarted too late.)
        # Rank 0 trains until rank 1 has ended (``UNTIL_LAST``; 4000 steps only bound it): each
        # step of rank 1 is judged against rank 0's step time on the machine's load of that
        # moment, not against the last one rank 0 had before it ended, ~2x earlier
        "two-ranks": (("--steps", "4000"), ("--steps", "280", "--inject", "slow-data@200")),
        # MindFormers' output/log tree of two ranks, rank 1 with a NaN
        "mf-two-ranks": (("--steps", "40"), ("--steps", "40", "--inject", "nan@30")),
    }
    #: runs of :attr:`RANKS` whose other ranks are stopped once the last rank has ended
    UNTIL_LAST = ("two-ranks",)
    #: runs launched by MindSpore's ``msrun`` (two workers): the same options for every rank
    MSRUN = {
        "mf-msrun": ("--steps", "40", "--inject", "nan@30", "--inject-rank", "1"),
    }

    #: runs of several ranks under a live sidecar, a rank started only once the sidecar has
    #: fired an alert (``STARTS``). first-rank: rank 1's block 1 spikes first (step 26) but is
    #: read late, since it starts once rank 0's spike (block 0, step 32) has fired; rank 0 then
    #: hangs at 34 until rank 1 has ended (``watched_ranks``), its alert still firing
    RANKS_WATCHED = {
        "first-rank": (("--steps", "40", "--inject", "grad-layer@32:0,hang@34",
                        "--hang-timeout", "900"),
                       ("--steps", "40", "--inject", "grad-layer@26:1")),
    }
    #: run -> {rank: (alert, rank)}: the rank starts once that alert fires on that rank
    STARTS = {"first-rank": {1: ("GradNormSpike", 0)}}

    #: runs that start from another run's last checkpoint (``--init-from``): (that run, options)
    FROM = {"init-skip": ("clean", ("--steps", "3", "--inject", "skip-load:1")),
            # a pre-flight fault on the first loss: a load that loads nothing
            "init-nothing": ("clean", ("--steps", "2", "--inject", "load-nothing"))}

    #: short runs, mostly the start-up of one core (imports, graph compilation): the first one
    #: asked for starts the second beside it, which is then ready when a test asks for it
    COMPANIONS = {"nan": "nan-fp16", "accum": "layers", "clean": "half"}

    def __init__(self, base: Path, cache: Path) -> None:
        self.base, self.cache = base, cache
        self.done: Dict[str, Path] = {}
        self.failed: Dict[str, BaseException] = {}
        self.pending: Dict[str, Future] = {}
        self.background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="companion-run")

    def __getitem__(self, name: str) -> Path:
        if name in self.failed:         # the next tests of a failed run show its first error
            raise RuntimeError(f"run {name!r} failed earlier in this session: "
                               f"{self.failed[name]}") from self.failed[name]
        try:
            if name in self.pending:
                self.done[name] = self.pending.pop(name).result()     # its failure fails this test
            if name not in self.done:
                companion = self.COMPANIONS.get(name)
                if companion and companion not in self.done and companion not in self.pending:
                    self.pending[companion] = self.background.submit(self._train, companion)
                self.done[name] = self._train(name)
        except (AssertionError, OSError, subprocess.SubprocessError) as error:
            self.failed[name] = error
            raise
        return self.done[name]

    def close(self) -> None:
        """Wait for a companion run no test asked for (its failure is nobody's)."""
        self.background.shutdown(wait=True)

    def _train(self, name: str) -> Path:
        """Train run ``name`` into its directory (in this thread)."""
        run_dir = self.base / name
        truth = ("--truth", str(truth_file(run_dir))) if name in self.TRUTH else ()
        if name in self.RESTARTS:
            first, again, pause = self.RESTARTS[name]
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            train(run_dir, self.cache, *first, *truth, timeout=LIVENESS, fails=True)
            time.sleep(pause)
            train(run_dir, self.cache, *again, *truth, timeout=LIVENESS)
        elif name in self.IN_CGROUP:
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            limit, argv = self.IN_CGROUP[name]
            train_in_cgroup(run_dir, self.cache, limit, *argv, timeout=LIVENESS)
        elif name in self.RANKS_WATCHED:
            watched_ranks(run_dir, self.cache, *self.RANKS_WATCHED[name],
                          starts=self.STARTS.get(name, {}))
        elif name in self.RANKS:
            train_ranks(run_dir, self.cache, *self.RANKS[name], timeout=LIVENESS,
                        until_last=name in self.UNTIL_LAST)
        elif name in self.MSRUN:
            train_msrun(run_dir, self.cache, msrun_log(run_dir), *self.MSRUN[name], timeout=LIVENESS)
        elif name in self.FROM:
            source, argv = self.FROM[name]
            ckpt = sorted((self[source] / "checkpoints" / "rank-0").glob("*.ckpt"))[-1]
            train(run_dir, self.cache, "--init-from", str(ckpt), *argv, timeout=LIVENESS)
        elif name in self.WITH_SIDECAR:
            rules = None
            if name in self.RULE_ACTIONS:
                rules = rules_with_action(self.base / f"{name}-rules", *self.RULE_ACTIONS[name])
            watched(run_dir, self.cache, *self.SPECS[name], *truth, rules=rules,
                    control=self.CONTROL_AT.get(name))
        else:
            done = train(run_dir, self.cache, *self.SPECS[name], timeout=LIVENESS)
            console(run_dir).write_text(done.stdout)
        return run_dir


def console(run_dir: Path) -> Path:
    """Where a run's console output (the trainer's stdout) is kept, beside its run directory."""
    return run_dir.parent / f"{run_dir.name}.stdout"


def rules_with_action(target: Path, alert: str, action: str) -> Path:
    """A copy of the shipped rules where rule ``alert`` has ``action``."""
    import shutil

    shutil.copytree(ROOT / "rules", target, ignore=shutil.ignore_patterns("tests", "prometheus"))
    for path in target.glob("*.yaml"):
        marker = f"      - alert: {alert}\n"
        text = path.read_text()
        if marker in text:
            path.write_text(text.replace(marker, marker + f"        action: {action}\n", 1))
    return target


def watched(run_dir: Path, cache: Path, *argv: str, rules: Optional[Path] = None,
            control: Optional[tuple] = None) -> None:
    """Train with a real ``msdoctor serve`` sidecar on the run; its ``alerts.jsonl`` stays.
    ``control``: ``(step, name, doc)``, written to ``control/<name>`` as soon as the checkpoint
    of ``step`` exists (an operator's hand)."""
    from tests.servers import sidecar, wait_until

    run_dir.mkdir(parents=True)
    workdir = run_dir.parent / f"{run_dir.name}-sidecar"
    workdir.mkdir()
    stop = threading.Event()
    hand = threading.Thread(target=write_once_saved, args=(run_dir, control, stop), daemon=True)
    with sidecar(run_dir, workdir, ["--no-default-rules", "--rules", str(rules)] if rules else []):
        if control:
            hand.start()
        try:
            train(run_dir, cache, *argv, timeout=LIVENESS)
        finally:
            stop.set()
        # the sidecar has seen the run end once it resolves what fired (or after a few polls)
        try:
            wait_until(lambda: any(a["state"] == "resolved" for a in journal(run_dir)), 10,
                       what="the sidecar to see the run end")
        except AssertionError:
            pass


def write_once_saved(run_dir: Path, control: tuple, stop: threading.Event) -> None:
    step, name, doc = control
    saved = run_dir / "checkpoints" / "rank-0" / f"step-{step:08d}.ckpt"
    while not stop.is_set() and not saved.exists():
        time.sleep(0.005)
    if saved.exists():
        target = run_dir / "control" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, target)


def watched_ranks(run_dir: Path, cache: Path, *per_rank: Sequence[str],
                  starts: Optional[Dict[int, Tuple[str, int]]] = None,
                  timeout: float = 600) -> None:
    """One trainer per rank under a live ``msdoctor serve``; a rank of ``starts`` is started
    once the sidecar has fired the named alert on the named rank (an order of reading that no
    machine load can change). When the last rank has ended, the others' ``hang@`` is released
    (a stop file for another run: it ends the hang, the hooks ignore it), so a rank can wait,
    hung, while a later one is read."""
    from tests.servers import sidecar, wait_until

    run_dir.mkdir(parents=True)
    workdir = run_dir.parent / f"{run_dir.name}-sidecar"
    workdir.mkdir()
    with sidecar(run_dir, workdir, []):
        procs = []
        for rank, argv in enumerate(per_rank):
            if rank in (starts or {}):
                alert, on = (starts or {})[rank]
                wait_until(lambda alert=alert, on=on: any(
                    a["alert"] == alert and a["rank"] == on and a["state"] == "firing"
                    for a in journal(run_dir)),
                           timeout, what=f"{alert} to fire on rank {on}")
            env = dict(os.environ, PYTHONPATH=str(ROOT), GLOG_v="3", RANK_ID=str(rank),
                       RANK_SIZE=str(len(per_rank)))
            procs.append(subprocess.Popen(command(run_dir, cache, *argv), cwd=str(run_dir.parent),
                                          env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
        last = procs[-1].communicate(timeout=timeout)[1]
        release = run_dir / "control" / "stop.json"
        release.parent.mkdir(exist_ok=True)
        release.write_text(json.dumps({"run": "another-run", "reason": "release the hang"}))
        errs = [p.communicate(timeout=timeout)[1] for p in procs[:-1]] + [last]
        for rank, (p, err) in enumerate(zip(procs, errs)):
            assert p.returncode == 0, f"rank {rank} failed ({p.returncode}):\n{err[-3000:]}"
        try:
            wait_until(lambda: any(a["state"] == "resolved" for a in journal(run_dir)), 10,
                       what="the sidecar to see the run end")
        except AssertionError:
            pass


def journal(run_dir: Path) -> List[Dict]:
    """The sidecar's alert transitions (``alerts.jsonl``)."""
    path = run_dir / "alerts.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

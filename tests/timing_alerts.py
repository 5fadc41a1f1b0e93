"""The alerts on wall-clock timings, which tests of real runs leave out of their comparisons.

On this shared machine another job slowing a run down is a real slowdown, which these rules are
right to report, and a log times its steps otherwise than the hooks do (MindFormers prints a
per-step time averaged over its sink): a real run's timing alerts depend on the machine's load and
on the source. Their false-alarm rate is measured on generated healthy runs
(``tests/bench/bench_detection2.py``), not on real runs.
"""

TIMING = ("ThroughputBelowBaseline", "ThroughputCollapse", "DataLoaderStarved", "StragglerRank",
          "StepTimeErratic")

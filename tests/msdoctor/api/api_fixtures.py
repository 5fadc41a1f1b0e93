"""The alert the API tests' feed holds (shared by conftest.py and the test modules)."""

#: The one firing alert the feed holds.
FIRING = {"alert": "LossNonFinite", "state": "firing", "severity": "critical", "run": "run-a",
          "rank": 1, "step": 25, "first_step": 25, "value": "nan",
          "summary": "Loss is nan at step 25 on rank 1.", "cause": "fp16 overflow",
          "fix": "Switch to bf16; clip gradients.", "runbook_url": "docs/runbook.md#lossnonfinite",
          "t": 1.0}

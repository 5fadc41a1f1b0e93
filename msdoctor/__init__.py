"""msdoctor: a training doctor for MindSpore / MindFormers LLM jobs.

This package's import is kept free of heavy dependencies: the training hooks
import :mod:`msdoctor.wire` from inside the training process.
"""
__version__ = "0.1.0"

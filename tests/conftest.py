"""Process-wide settings for the test session.

MindSpore sets ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` when it is imported (its
generated protobuf modules need the pure-Python runtime); once another package has loaded
protobuf with its default C runtime, importing MindSpore fails ("Descriptors cannot be
created directly"). The replay tests load TensorBoard (protobuf) in this process and other
tests import MindSpore later, so the session chooses MindSpore's setting before either.
"""
import os

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

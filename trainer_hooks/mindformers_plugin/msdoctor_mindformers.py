"""A module file for MindFormers' ``auto_register`` (``REGISTER_PATH`` = this directory).

YAML: ``- type: MsDoctorMonitor`` with ``auto_register: msdoctor_mindformers.MsDoctorMonitor``.
MindFormers copies this file into its dynamic-module cache and imports the class from it;
the class itself lives in the installed ``trainer_hooks`` package.
"""
from trainer_hooks.mindformers import MsDoctorMonitor

__all__ = ["MsDoctorMonitor"]

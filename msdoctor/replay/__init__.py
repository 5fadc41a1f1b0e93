"""Replaying recorded training: msdoctor spools and other frameworks' logs through the rule engine.

``formats`` names and detects the inputs; one reader per format (``mindformers``,
``mindspore``, ``table`` for CSV / JSON lines; spools go through the sidecar's own
``SpoolTailer``) fills a :class:`~msdoctor.replay.recording.Recording` whose step batches feed
the same :class:`~msdoctor.core.engine.Engine` as the live sidecar; ``driver`` runs it and ``stats``
summarises the run. See ``docs/formats/``.
"""

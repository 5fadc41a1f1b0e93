"""The core: batches, the spool, the state, snapshots, the rule engine, alerts, the one
pipeline and the query layer. Imports :mod:`msdoctor.wire` and nothing of the front ends."""

"""The sidecar's HTTP server: ``/metrics`` (exporter), ``/api/v1`` (api) and alert delivery,
wired together for ``msdoctor serve``."""

"""The deleter's own errors (the REST routes turn them into status codes)."""

from __future__ import annotations

from hudi_sink.shared.errors import HudiSinkError

__all__ = ["ServiceUnavailable"]


class ServiceUnavailable(HudiSinkError):
    """The action needs Kafka, or clients the service has not started (yet): 503."""

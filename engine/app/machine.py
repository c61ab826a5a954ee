"""This machine's Docker engine: is it ready (``bandpass doctor``), start one (``--fix``), the client
everything else uses, and the offline base image task images build on (``bandpass images base``)."""

from __future__ import annotations

from ..sandbox.docker_engine import DockerUnavailable, doctor, ensure_engine, get_client
from ..tasks.images import BASE_TAG, build_base_image

__all__ = ["BASE_TAG", "DockerUnavailable", "build_base_image", "doctor", "ensure_engine", "get_client"]

"""The podman tier's test images (.ci/build-images), read through podman. The fixture
that builds them (``images``) is in tests/conftest.py."""

from __future__ import annotations

import subprocess

IMG = "localhost/proton-survey-test"


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300, check=check)


def digest_of(ref: str) -> str:
    return podman("image", "inspect", "--format", "{{.Digest}}", ref).stdout.strip()

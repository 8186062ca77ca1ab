"""What was probed, and where: the environment's and the platform's identities.

- The *environment* identity is the sha256 of an identity document that the host
  side writes into the report's ``origin`` (``survey/environments/launchers``): a venv or
  interpreter is its prefix plus its distributions' RECORD hashes (never its base
  interpreter), a pip candidate the resolved wheels and their sha256, an image its
  digest. A report without an origin (the probe run by hand, schema version 1) is
  identified by what it reports itself: host, prefix, Python and distributions.
- The *platform* identity is the report's ``platform.key`` (``probes/gpuinfo.py``);
  a version-1 report only knows the GPU vendor, so its architecture is unknown.

Both are derived from the report alone, so a report copied to another machine and
ingested later files under the same identities.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform as _platform
import socket
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probes import PROBE_VERSION, records
from survey.core import clock

UNKNOWN_VENDOR = "unknown"  # a platform whose GPU vendor (or machine) a report does not name

if TYPE_CHECKING:  # annotations only: reading the store needs no report model (the CLI's read path stays light)
    from survey.evidence.report import Report


def digest(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# ----------------------------------------------------------------- platform
@dataclass(frozen=True)
class PlatformId:
    key: str
    vendor: str
    model: str | None
    arch: str | None
    detail: dict[str, Any]

    @property
    def label(self) -> str:
        return platform_label(self.vendor, self.model, self.arch)


def platform_label(vendor: str, model: str | None, arch: str | None) -> str:
    if vendor == "none":
        return f"no GPU ({arch or 'unknown CPU'})"
    name = model or f"{vendor.upper() if vendor == 'amd' else vendor.capitalize()} GPU, model unknown"
    return f"{name} ({arch or 'arch unknown'})"


def platform_of(report: Report) -> PlatformId:
    p = report.platform
    if p is not None:
        return PlatformId(p.key, p.vendor, p.model, p.arch,
                          {"driver": p.driver, "runtime": p.runtime,
                           "devices": [d.model_dump() for d in p.devices], "errors": p.errors})
    # Schema version 1: the GPU's vendor only.
    vendors = report.environment.gpu.vendors
    machine = report.environment.platform.machine
    if not vendors:
        return PlatformId(f"none:{machine or UNKNOWN_VENDOR}", "none", None, machine,
                          {"note": "schema version 1 report: no GPU device nodes were seen"})
    vendor = vendors[0] if vendors[0] in ("nvidia", "amd") else UNKNOWN_VENDOR
    return PlatformId(f"{vendor}:unknown-arch:unknown-model", vendor, None, None,
                      {"note": "schema version 1 report: GPU model and architecture were not recorded"})


@functools.cache
def local_platform() -> PlatformId:
    """This host's platform, detected the way the probe detects it."""
    from probes import facts, gpuinfo, runner

    def cuda_query() -> dict[str, Any]:
        argv = [sys.executable, "-c", "from probes import gpuinfo; gpuinfo.print_cuda_query()"]
        proc = runner.run(argv, None, 60.0, keep_stdout=True)
        try:
            return dict(json.loads(proc["stdout"].decode("utf-8", "replace")))
        except ValueError:
            return {"devices": [], "error": f"the query printed no answer (exit {proc['exit_code']})"}

    rec: dict[str, Any] = records.make("platform", **gpuinfo.detect(facts.gpu_fact(), cuda_query))
    return PlatformId(rec["key"], rec["vendor"], rec["model"], rec["arch"],
                      {"driver": rec["driver"], "runtime": rec["runtime"], "devices": rec["devices"],
                       "errors": rec["errors"]})


# ----------------------------------------------------------------- environment
@dataclass(frozen=True)
class EnvironmentId:
    identity: str
    kind: str
    doc: dict[str, Any]
    label: str


def reported_identity(report: Report) -> dict[str, Any]:
    """The identity of a report without an origin: what it says about itself."""
    env = report.environment
    return {
        "kind": "reported",
        "host": env.platform.hostname,
        "prefix": env.python.prefix,
        "python": env.python.version,
        # (a version may be null: sorted on text, so two entries of one name still order)
        "distributions": sorted(((d.name, d.version) for d in env.distributions),
                                key=lambda nv: (nv[0], nv[1] is not None, nv[1] or "")),
        "triton": [env.triton.distribution, env.triton.version],
    }


def environment_of(report: Report) -> EnvironmentId:
    origin = report.origin
    if origin is not None:
        doc = dict(origin.identity)
        kind = origin.kind
    else:
        doc = reported_identity(report)
        kind = "reported"
    return EnvironmentId(digest(doc), kind, doc, environment_label(kind, doc, report))


def environment_label(kind: str, doc: dict[str, Any], report: Report | None = None) -> str:
    tri = report.environment.triton if report is not None else None
    triton = f", Triton {tri.version}" if tri is not None and tri.version else ""
    if doc.get("env"):  # names only: values may be secrets
        triton += f", with {', '.join(sorted(doc['env']))} set"
    if kind == "image":
        return f"image {doc.get('digest') or doc.get('image_id')}{triton}"
    if kind == "pip":
        reqs = " ".join(doc.get("requirements") or [])
        return f"venv of {reqs}{triton}"
    if kind == "interpreter":
        return f"Python at {doc.get('prefix')}{triton}"
    return f"Python at {doc.get('prefix')} on {doc.get('host')}{triton} (as reported)"


def identity_of_resolved(kind: str, resolved: dict[str, Any]) -> dict[str, Any]:
    """The identity document of what a launcher obtained (see Resolved.identity_doc).

    Baseline variables the launcher applies (``env``, an aorta environment's) are
    part of it when there are any: the same venv with another baseline is another
    environment; without one the document is what it always was."""
    doc = _identity_of_resolved(kind, resolved)
    if resolved.get("env"):
        doc["env"] = dict(sorted(resolved["env"].items()))
    return doc


def _identity_of_resolved(kind: str, resolved: dict[str, Any]) -> dict[str, Any]:
    if kind == "python":
        return {"kind": "interpreter", "prefix": resolved.get("prefix"), "python": resolved.get("python"),
                "machine": resolved.get("machine"), "distributions": resolved.get("distributions", [])}
    if kind == "pip":
        return {"kind": "pip", "python": resolved.get("python"), "requirements": resolved.get("requirements"),
                "index_url": resolved.get("index_url"), "extra_index_urls": resolved.get("extra_index_urls"),
                "installed": [{"name": i.get("name"), "version": i.get("version"), "sha256": i.get("sha256")}
                              for i in resolved.get("installed", [])]}
    if kind == "image":
        # The digest decides; the distributions (fixed by it) are kept so a diff can say what changed.
        return {"kind": "image", "digest": resolved.get("digest"), "image_id": resolved.get("image_id"),
                "python": resolved.get("python"), "distributions": resolved.get("distributions", [])}
    raise ValueError(f"unknown launcher kind {kind!r}")


def host_record() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "machine": _platform.machine()}


def attach_origin(raw: bytes, origin: dict[str, Any]) -> bytes:
    """The probe's report with the host side's origin written into it."""
    data = json.loads(raw)
    data["origin"] = origin
    return (json.dumps(data, indent=1, ensure_ascii=True) + "\n").encode()


def now_iso() -> str:
    return clock.now().isoformat(timespec="seconds")


def make_origin(kind: str, target: str | None, resolved: dict[str, Any], **sections: Any) -> dict[str, Any]:
    origin_kind = {"python": "interpreter"}.get(kind, kind)
    origin: dict[str, Any] = records.make(
        "origin", kind=origin_kind, target=target, identity=identity_of_resolved(kind, resolved),
        host=host_record(), recorded_by=f"proton-survey probe {PROBE_VERSION}", recorded_at=now_iso(), **sections)
    return origin


@dataclass
class Resolved:
    kind: str  # python | pip | image
    resolved: dict[str, Any]
    python: str | None = None
    image_digest: str | None = None
    notes: list[str] = field(default_factory=list)
    target: str | None = None  # how the user named it

    @property
    def identity_doc(self) -> dict[str, Any]:
        """What identifies the environment (survey/evidence/identity.py); volatile details
        (the executable's spelling, engine flags) stay out of it."""
        return identity_of_resolved(self.kind, self.resolved)

    @property
    def identity(self) -> str:
        """sha256 of the identity document (without the probe's version: runs carry that)."""
        return digest(self.identity_doc)

    def origin(self) -> dict[str, Any]:
        """The report's ``origin``: where it came from, written by the host side."""
        r = self.resolved
        sections: dict[str, Any] = {}
        if self.kind == "python":
            sections["interpreter"] = {"executable": r.get("executable"), "prefix": r.get("prefix"),
                                       "base_prefix": r.get("base_prefix"), "version": r.get("python")}
            if r.get("env"):
                sections["interpreter"]["env"] = r["env"]
        elif self.kind == "pip":
            sections["pip"] = {k: r.get(k) for k in ("requirements", "index_url", "extra_index_urls", "pre",
                                                      "installed")}
            sections["interpreter"] = {"executable": self.python, "version": r.get("python")}
        elif self.kind == "image":
            sections["image"] = {"reference": r.get("image"), "id": r.get("image_id"), "digest": r.get("digest"),
                                 "engine": r.get("engine"), "python": r.get("interpreter")}
            if r.get("env"):
                sections["image"]["env"] = r["env"]
        return make_origin(self.kind, self.target, r, **sections)

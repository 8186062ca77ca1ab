"""Container images: real images, built on this machine by ``.ci/build-images``
(a Debian bookworm root filesystem with python3 and real Triton wheels from PyPI,
``podman import``-ed and layered), probed through podman with ``ImageLauncher``.

The test doubles are environments only: an image with no Python (busybox) and an
image whose python3 hangs in the probe (a wrapper in /usr/local/bin).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from db import models as m
from db.store import Store
from survey.core.errors import EngineUnavailable, ImageNotFound, NotAPython, ProbeFailed, Unobtainable
from survey.environments import probe as probe_run
from survey.environments.catalog import Entry
from survey.environments.launchers import image as image_mod
from survey.environments.launchers.image import ImageLauncher, gpu_flags
from survey.environments.launchers.pip import PipLauncher
from survey.evidence import queries
from survey.flows.run import Outcome, ProbeSettings, run_survey, survey_one
from survey.verdicts import diff as survey_diff
from tests.helpers.images import IMG, digest_of, podman

pytestmark = pytest.mark.podman

MOVING = f"{IMG}:moving"
CHECK_TIMEOUT = 60.0


def id_of(ref: str) -> str:
    return podman("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()


def report(raw: bytes) -> dict[str, Any]:
    data = json.loads(raw)
    assert isinstance(data, dict)
    return data


def mode_map(rep: dict[str, Any]) -> dict[tuple[str, str | None, bool], str]:
    return {(x["backend"], x["mode"], bool(x["stub"])): x["outcome"] for x in rep["modes"]}


def runs(store: Store) -> list[m.Run]:
    with store.session() as s:
        return list(s.scalars(select(m.Run).order_by(m.Run.id)))


def count(store: Store, model: type[m.Base]) -> int:
    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


class Watch:
    """Names of our containers seen running while something else happens."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            out = podman("ps", "--format", "{{.Names}}", check=False).stdout
            self.seen |= {n for n in out.split() if n.startswith("proton-survey-")}
            self._stop.wait(0.5)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def ours() -> set[str]:
    """Our containers that still exist, running or not."""
    out = podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
    return {n for n in out if n.startswith("proton-survey-")}


def leftovers(names: set[str]) -> set[str]:
    return names & ours()


def survey_image(store: Store, name: str, launcher: ImageLauncher, **kw: Any) -> Outcome:
    return survey_one(store, name, name, "image", {"image": launcher.image}, 0, launcher,
                      ProbeSettings(timeout=CHECK_TIMEOUT, **kw))


# --------------------------------------------------------------------------- obtain + probe
def test_image_probe_matches_the_same_triton_in_a_venv(images: list[str]) -> None:
    ref = f"{IMG}:triton-3.8.0"
    launcher = ImageLauncher(ref, engine="podman", pull="never")
    assert launcher.kind == "image" and ref in launcher.describe()
    resolved = launcher.obtain()
    assert resolved.kind == "image"
    assert resolved.image_digest == digest_of(ref) and resolved.image_digest.startswith("sha256:")
    r = resolved.resolved
    assert (r["image"], r["digest"], r["engine"], r["interpreter"]) == (ref, digest_of(ref), "podman", "python3")
    assert r["image_id"] == f"sha256:{id_of(ref)}"
    assert r["python"].startswith("3.11.") and r["executable"] == "/usr/bin/python3"
    assert {d["name"]: d["version"] for d in r["distributions"]}.get("triton") == "3.8.0"

    with Watch() as watch:
        raw, has_triton = launcher.probe(resolved, probe_run.probe_args(CHECK_TIMEOUT),
                                         probe_run.overall_timeout(CHECK_TIMEOUT))
    assert has_triton
    img = report(raw)
    assert img["environment"]["triton"]["version"] == "3.8.0"
    assert img["environment"]["python"]["executable"] == "/usr/bin/python3"
    assert "/usr/local/lib/python3.11/dist-packages/triton" in json.dumps(img["environment"]["triton"])
    assert img["stubs"]["status"] == "found", img["stubs"]  # the host-built stubs shipped in the bundle
    assert watch.seen and not leftovers(watch.seen)  # it ran in a container, which is gone

    pip = PipLauncher(["triton==3.8.0"])
    presolved = pip.obtain()
    praw, phas = pip.probe(presolved, probe_run.probe_args(CHECK_TIMEOUT), probe_run.overall_timeout(CHECK_TIMEOUT))
    venv = report(praw)
    assert phas
    assert venv["environment"]["triton"]["version"] == img["environment"]["triton"]["version"]
    assert img["registry"]["profilers"] == venv["registry"]["profilers"]
    assert img["registry"]["cli_backends"] == venv["registry"]["cli_backends"]
    assert img["registry"]["profilers"]  # not a comparison of two empty answers
    assert len(mode_map(img)) >= 10
    assert mode_map(img) == mode_map(venv)


def test_explicit_interpreter_and_an_image_without_triton(images: list[str]) -> None:
    launcher = ImageLauncher(f"{IMG}:base", engine="podman", python="/usr/bin/python3")
    resolved = launcher.obtain()
    assert resolved.resolved["interpreter"] == "/usr/bin/python3" and resolved.python == "/usr/bin/python3"
    assert "triton" not in {d["name"] for d in resolved.resolved["distributions"]}
    raw, has_triton = launcher.probe(resolved, probe_run.probe_args(CHECK_TIMEOUT), 300)
    assert not has_triton
    assert report(raw)["environment"]["triton"]["status"] != "found"


def test_engine_from_the_environment(images: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURVEY_ENGINE", "podman")
    assert ImageLauncher(f"{IMG}:base").engine == "podman"
    monkeypatch.setenv("SURVEY_ENGINE", "no-such-engine")
    with pytest.raises(EngineUnavailable):
        ImageLauncher(f"{IMG}:base")


# --------------------------------------------------------------------------- the digest is the identity
@pytest.fixture
def moving(images: list[str]) -> Iterator[str]:
    yield MOVING
    podman("rmi", MOVING, check=False)  # only untags an image that has other names


def test_same_digest_is_reused_and_a_moved_tag_is_a_new_run(store: Store, moving: str) -> None:
    podman("tag", f"{IMG}:triton-3.7.1", moving)
    first = survey_image(store, "moving", ImageLauncher(moving, engine="podman", pull="never"))
    assert first.status == "probed", first.message
    again = survey_image(store, "moving", ImageLauncher(moving, engine="podman", pull="never"))
    assert (again.status, again.run_id) == ("unchanged", first.run_id)
    assert len(runs(store)) == 1

    podman("tag", f"{IMG}:triton-3.8.0", moving)  # the same tag, another image
    assert digest_of(moving) == digest_of(f"{IMG}:triton-3.8.0") != digest_of(f"{IMG}:triton-3.7.1")
    moved = survey_image(store, "moving", ImageLauncher(moving, engine="podman", pull="never"))
    assert moved.status == "probed" and moved.run_id != first.run_id, moved.message
    assert [(r.status, r.image_digest) for r in runs(store)] == [
        ("complete", digest_of(f"{IMG}:triton-3.7.1")), ("complete", digest_of(f"{IMG}:triton-3.8.0"))]

    assert first.run_id is not None and moved.run_id is not None
    with store.session() as s:
        a, b = queries.get_run(s, first.run_id), queries.get_run(s, moved.run_id)
        assert a.environment is not None and b.environment is not None
        assert a.environment.identity != b.environment.identity
        d = survey_diff.diff_runs(a, b)
        ra, rb = json.loads(a.report.raw), json.loads(b.report.raw)  # type: ignore[union-attr]
    assert not d["same"]
    assert d["fields"]["triton_version"] == {"a": "3.7.1", "b": "3.8.0"}
    assert d["fields"]["image_digest"] == {"a": digest_of(f"{IMG}:triton-3.7.1"), "b": digest_of(f"{IMG}:triton-3.8.0")}
    env = {c["key"]: (c["a"], c["b"]) for c in d["environment"]}
    assert env["triton"] == ("3.7.1", "3.8.0")
    assert env["digest"] == (d["fields"]["image_digest"]["a"], d["fields"]["image_digest"]["b"])
    # what diff says changed is what the two stored reports say
    assert ("profilers" in d["fields"]) == (ra["registry"]["profilers"] != rb["registry"]["profilers"])
    assert ("cli_backends" in d["fields"]) == (ra["registry"]["cli_backends"] != rb["registry"]["cli_backends"])
    assert "rocprofiler" in rb["registry"]["cli_backends"] and "rocprofiler" not in ra["registry"]["cli_backends"]
    live_a = {k: v for k, v in mode_map(ra).items() if not k[2]}
    live_b = {k: v for k, v in mode_map(rb).items() if not k[2]}
    changed = {c["key"] for c in d["modes"]}
    expected = {f"{k[0]}:{queries.mode_label(k[1])}" for k in set(live_a) | set(live_b)
                if live_a.get(k) != live_b.get(k)}
    assert expected and expected <= changed


def test_identity_is_the_digest(store: Store, moving: str, tmp_path: Path) -> None:
    """Same files, another digest (a label added on top): another environment, probed again."""
    podman("tag", f"{IMG}:triton-3.8.0", moving)
    a = ImageLauncher(moving, engine="podman", pull="never").obtain()
    assert a.identity == ImageLauncher(moving, engine="podman", pull="never").obtain().identity
    first = survey_image(store, "relabelled", ImageLauncher(moving, engine="podman", pull="never"))
    assert first.status == "probed", first.message

    (tmp_path / "Containerfile").write_text(f"FROM {IMG}:triton-3.8.0\nLABEL proton-survey.test={tmp_path.name}\n")
    podman("build", "--pull=never", "-t", moving, str(tmp_path))
    b = ImageLauncher(moving, engine="podman", pull="never").obtain()
    assert b.image_digest != a.image_digest
    assert b.resolved["distributions"] == a.resolved["distributions"]  # nothing inside changed...
    assert b.identity != a.identity  # ...but the digest did
    again = survey_image(store, "relabelled", ImageLauncher(moving, engine="podman", pull="never"))
    assert again.status == "probed" and again.run_id != first.run_id
    with store.session() as s:
        d = survey_diff.diff_runs(queries.get_run(s, first.run_id or 0), queries.get_run(s, again.run_id or 0))
    assert set(d["fields"]) == {"image_digest"} and not d["modes"]


# --------------------------------------------------------------------------- errors
def assert_nothing_complete(store: Store) -> None:
    assert all(r.status != "complete" for r in runs(store))
    assert count(store, m.Environment) == count(store, m.Report) == count(store, m.ModeRow) == 0


def test_unknown_or_missing_engine(images: list[str], store: Store, monkeypatch: pytest.MonkeyPatch,
                                   tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailable) as e:
        ImageLauncher(f"{IMG}:base", engine="rkt")
    assert e.value.exit_code == 69 and "rkt" in e.value.message

    # `survey run` with an engine it cannot use: stored as unobtainable, with the engine's error
    entry = Entry(name="img-base", image=f"{IMG}:base")
    outs = run_survey(store, [(0, entry)], jobs=1, settings=ProbeSettings(timeout=CHECK_TIMEOUT), engine="rkt")
    assert [o.status for o in outs] == ["unobtainable"] and outs[0].run_id is not None and "rkt" in outs[0].message
    assert [r.status for r in runs(store)] == ["unobtainable"]
    assert_nothing_complete(store)

    # docker: the client alone is not an engine
    docker = subprocess.run(["sh", "-c", "docker version --format '{{.Server.Version}}'"], capture_output=True)
    if docker.returncode != 0:
        with pytest.raises(EngineUnavailable):
            ImageLauncher(f"{IMG}:base", engine="docker")

    # no engine on PATH at all
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("SURVEY_ENGINE", raising=False)
    with pytest.raises(EngineUnavailable, match="podman is not installed"):
        ImageLauncher(f"{IMG}:base", engine="podman")
    with pytest.raises(EngineUnavailable, match="no usable container engine") as e:
        ImageLauncher(f"{IMG}:base")
    assert "docker is not installed" in e.value.message


def test_image_that_does_not_exist(images: list[str], store: Store) -> None:
    ref = f"{IMG}:does-not-exist"
    assert podman("image", "exists", ref, check=False).returncode == 1
    with pytest.raises(ImageNotFound, match="image not known"):
        ImageLauncher(ref, engine="podman", pull="never").obtain()

    out = survey_image(store, "nope", ImageLauncher(ref, engine="podman", pull="never"))
    assert out.status == "unobtainable" and "does-not-exist" in out.message
    assert_nothing_complete(store)

    # pulling it: no registry is reachable here; the engine's own error is what is kept
    with pytest.raises((Unobtainable, ImageNotFound)) as e:
        ImageLauncher(ref, engine="podman", pull="missing").obtain()
    engine_text = subprocess.run(["podman", "pull", ref], capture_output=True, text=True).stderr
    last = [ln for ln in engine_text.splitlines() if ln.startswith("Error")][-1]
    assert last in e.value.message
    out = survey_image(store, "nope-pulled", ImageLauncher(ref, engine="podman", pull="missing"))
    assert out.status == "unobtainable"
    with store.session() as s:
        run = s.scalar(select(m.Run).join(m.Candidate).where(m.Candidate.name == "nope-pulled"))
        assert run is not None and run.status == "unobtainable" and last in (run.error or "")
    assert_nothing_complete(store)
    assert podman("image", "exists", ref, check=False).returncode == 1


def test_image_without_python(images: list[str], store: Store) -> None:
    ref = f"{IMG}:no-python"
    before = ours()
    assert podman("run", "--rm", "--network=none", ref, "sh", "-c", "echo hi").stdout == "hi\n"  # it does run
    with pytest.raises(NotAPython) as e:
        ImageLauncher(ref, engine="podman").obtain()
    assert "has no Python" in e.value.message and "python3" in e.value.message and "python:" in e.value.message
    with pytest.raises(NotAPython, match="/opt/py/bin/python3"):
        ImageLauncher(ref, engine="podman", python="/opt/py/bin/python3").obtain()
    out = survey_image(store, "no-python", ImageLauncher(ref, engine="podman"))
    assert out.status == "unobtainable" and "has no Python" in out.message
    assert_nothing_complete(store)
    assert not ours() - before  # containers that failed to start are removed too


def test_hanging_container_is_killed_and_removed(images: list[str]) -> None:
    launcher = ImageLauncher(f"{IMG}:hangs", engine="podman")
    resolved = launcher.obtain()  # its python answers `resolve`; it hangs in `probe`
    with Watch() as watch, pytest.raises(ProbeFailed, match="killed and removed") as e:
        launcher.probe(resolved, probe_run.probe_args(CHECK_TIMEOUT), 5)
    assert len(watch.seen) == 1 and next(iter(watch.seen)) in e.value.message
    assert not leftovers(watch.seen)


def test_hanging_container_stores_no_evidence(images: list[str], store: Store,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_run, "overall_timeout", lambda _t: 5.0)  # not the real 2-minute minimum
    with Watch() as watch:
        out = survey_image(store, "hangs", ImageLauncher(f"{IMG}:hangs", engine="podman"))
    assert out.status == "failed" and "killed and removed" in out.message
    assert [r.status for r in runs(store)] == ["failed"]
    assert_nothing_complete(store)
    assert watch.seen and not leftovers(watch.seen)


def test_bad_pull_policy(images: list[str]) -> None:
    from survey.core.errors import InputError

    with pytest.raises(InputError, match="pull policy"):
        ImageLauncher(f"{IMG}:base", engine="podman", pull="sometimes")


# --------------------------------------------------------------------------- GPU devices
def test_gpu_device_flags(tmp_path: Path) -> None:
    assert gpu_flags("podman", str(tmp_path)) == []
    (tmp_path / "kfd").touch()
    amd = [f"--device={tmp_path}/kfd", f"--device={tmp_path}/dri", "--group-add", "video",
           "--security-opt", "seccomp=unconfined"]
    assert gpu_flags("podman", str(tmp_path)) == gpu_flags("docker", str(tmp_path)) == amd
    (tmp_path / "kfd").unlink()
    (tmp_path / "nvidia0").touch()
    assert gpu_flags("podman", str(tmp_path)) == ["--device", "nvidia.com/gpu=all"]
    assert gpu_flags("docker", str(tmp_path)) == ["--gpus", "all"]
    assert image_mod.flavor("/usr/bin/podman") == "podman" and image_mod.flavor("rkt") is None

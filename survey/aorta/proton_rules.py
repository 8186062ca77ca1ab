"""Two rules about how a Proton configuration becomes a Proton session, as
Triton's own code decides them. Pure functions: the caller brings the facts
(from stored evidence), these say what follows.

``resolve_auto``: aorta's ``backend: auto`` omits Proton's ``-b`` (the declared aorta release
``aorta/instrumentation/proton/__init__.py:231-236``; under ``mode: env`` it
omits ``AORTA_PROTON_BACKEND``, ``:277-281``), so Proton's ``_select_backend()``
picks. Which backend that is depends on the Triton release, not on what loads:

- Triton <= 3.7.1 (no profiler registry, ``get_available_profilers`` absent):
  ``triton/profiler/profile.py:15-22`` maps the active target ``cuda`` to
  ``cupti`` and ``hip`` to ``roctracer``.
- Triton >= 3.8.0: ``profile.py:15-17`` asks
  ``libproton.select_profiler_from_triton_backend(target)``, which returns the
  first *registered* profiler whose Triton backend matches: ``cupti`` for
  ``cuda``, ``rocprofiler`` for ``hip``; ``roctracer`` has no Triton backend and
  is never chosen. It does not look at whether ``librocprofiler-sdk.so`` loads:
  on this host, where it does not, the 3.8.0 and 3.9.0 wheels still answer
  ``rocprofiler`` for ``hip`` (tests/test_aorta.py measures it), and the start
  then fails to load the library. the declared aorta release's docstring
  (``proton/__init__.py:31-33``: "rocprofiler where rocprofiler-sdk is
  available, roctracer otherwise") does not describe that code.

``mode_dropped``: under aorta's ``mode: cli`` the mode travels as Proton's
``--mode`` (the declared aorta release ``proton/__init__.py:243-245``). Triton 3.7.1's
front-end parses ``-m/--mode`` (``triton/profiler/proton.py:22``) and then calls
``start()`` without it (``proton.py:74``); 3.8.0 and 3.9.0 pass
``mode=args.mode`` (``proton.py:75``). Under ``mode: env`` the workload calls
``proton.start(mode=...)`` itself, which every release takes.
"""

from __future__ import annotations

from typing import Literal, Optional, Sequence, TypeGuard, get_args

from survey.core.versions import release

Vendor = Literal["nvidia", "amd", "none"]


def is_vendor(name: str) -> TypeGuard[Vendor]:
    """Whether a platform's vendor is one ``backend: auto`` resolves for."""
    return name in get_args(Vendor)


# The first release whose CLI passes --mode on to start() (read in the 3.8.0 wheel).
MODE_PASSED_SINCE = (3, 8, 0)
# The Triton target name each vendor's GPUs report (GPUTarget.backend).
_TARGET = {"nvidia": "cuda", "amd": "hip"}
# Registered profilers that carry a Triton backend (Triton >= 3.8.0 registry order).
_REGISTRY_CHOICE = {"cuda": "cupti", "hip": "rocprofiler"}
# Triton <= 3.7.1: profile.py _select_backend.
_PRE_REGISTRY_CHOICE = {"cuda": "cupti", "hip": "roctracer"}


def resolve_auto(
    platform_vendor: Vendor,
    available: Optional[Sequence[str]],
    rocprofiler_sdk_loads: Optional[bool],
) -> tuple[Optional[str], str]:
    """The backend Proton picks when none is named, and why.

    ``available`` is ``libproton.get_available_profilers()`` as measured, or
    ``None`` where the function does not exist (Triton <= 3.7.1).
    ``rocprofiler_sdk_loads`` is whether ``librocprofiler-sdk.so`` dlopens there
    (``None``: not measured). Returns ``(None, reason)`` when Proton would pick
    nothing and refuse to start.
    """
    if platform_vendor not in ("nvidia", "amd", "none"):
        raise ValueError(f"platform_vendor must be nvidia, amd or none, not {platform_vendor!r}")
    if platform_vendor == "none":
        return None, ("backend auto: Proton picks from the active GPU target, and there is no GPU here, "
                      "so it has nothing to pick")
    target = _TARGET[platform_vendor]
    if available is None:
        choice = _PRE_REGISTRY_CHOICE[target]
        return choice, (f"backend auto on {platform_vendor.upper()}: this Triton has no profiler registry "
                        f"(<= 3.7.1), whose _select_backend maps {target} to {choice}")
    choice = _REGISTRY_CHOICE[target]
    if choice not in available:
        return None, (f"backend auto on {platform_vendor.upper()}: Proton selects the registered profiler for "
                      f"{target} ({choice}), and this build registers only {', '.join(available) or 'none'}; "
                      f"start() fails with 'No profiler registered for triton backend {target}'")
    why = f"backend auto on {platform_vendor.upper()}: Proton's registry selects {choice} for {target}"
    if choice != "rocprofiler":
        return choice, why
    if rocprofiler_sdk_loads is False:
        return choice, (why + "; librocprofiler-sdk.so does not load here and Proton does not fall back to "
                        "roctracer, so the start fails to load the library (name roctracer to use it)")
    if rocprofiler_sdk_loads is None:
        return choice, why + " (whether librocprofiler-sdk.so loads here was not measured)"
    return choice, why + "; librocprofiler-sdk.so loads here"


def mode_dropped(launch_mode: str, triton_version: Optional[str], mode: Optional[str]) -> Optional[str]:
    """Why ``mode`` would be silently dropped, or ``None`` when it reaches Proton.

    ``launch_mode`` is aorta's ``cli`` or ``env``. ``triton_version`` ``None``
    means unknown: no claim is made (``None``). An unparseable version raises
    ``ValueError``.
    """
    if launch_mode not in ("cli", "env"):
        raise ValueError(f"launch mode must be cli or env, not {launch_mode!r}")
    if mode is None or launch_mode == "env" or triton_version is None:
        return None
    if release(triton_version) >= MODE_PASSED_SINCE:
        return None
    return (f"mode {mode!r} is silently dropped: aorta's mode: cli passes it as Proton's --mode, and Triton "
            f"{triton_version}'s proton front-end parses -m/--mode and then calls start() without it "
            "(fixed in 3.8.0), so the run profiles in the backend's default mode; use mode: env, whose "
            "payload calls proton.start(mode=...) itself, or Triton >= 3.8.0")

"""Webhooks: what a survey changed, POSTed as JSON to each ``survey run --notify URL``.

After the survey, the changes its new runs made (:mod:`survey.verdicts.changes`) are
sent to every URL, once each, in one JSON document::

    {"event": "survey.changes", "schema": 1, "sent_at": "2026-12-03T10:00:00+00:00",
     "runs": [41, 42], "count": 26, "changes": [{...one /changes.json entry...}, ...]}

A survey that changed nothing sends nothing. The body is signed with HMAC-SHA256 under
the secret in ``SURVEY_WEBHOOK_SECRET`` (required with ``--notify``), in the header

    X-Survey-Signature: sha256=<hex digest of HMAC-SHA256(secret, raw body)>

so a receiver recomputes it over the bytes it received and compares in constant time
(``hmac.compare_digest``). ``X-Survey-Event: survey.changes`` and ``X-Survey-Delivery``
(the body's sha256, the same on every retry of one delivery) come with it.

A delivery is tried up to :data:`ATTEMPTS` times, :data:`TIMEOUT_S` seconds each, with
:data:`BACKOFF_S`, twice that, four times that... between (``SURVEY_WEBHOOK_BACKOFF``
sets the first wait), when the receiver cannot be reached, times out, or answers 408,
425, 429 or 5xx; any other answer than 2xx is final. Each delivery, delivered or
failed, is recorded in the store (``deliveries``: URL with any password masked, status,
attempts, last HTTP status, error); ``survey changes`` lists the failed ones. Nothing
here raises into the survey: a receiver that is down costs at most
``ATTEMPTS * TIMEOUT_S`` plus the waits, and the survey's exit status is unchanged.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from survey.core import clock
from survey.core.errors import UsageProblem

if TYPE_CHECKING:
    from db.store import Store

SECRET_ENV = "SURVEY_WEBHOOK_SECRET"
BACKOFF_ENV = "SURVEY_WEBHOOK_BACKOFF"
HEADER = "X-Survey-Signature"
EVENT = "survey.changes"
ATTEMPTS = 4
TIMEOUT_S = 10.0
BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
RETRY_STATUSES = frozenset({408, 425, 429})


def internal_address(host: str) -> str | None:
    """The loopback, link-local, private or otherwise non-public address ``host`` is or
    resolves to (a webhook must not reach this machine's or its network's own services),
    else None. A name that does not resolve now is left to the delivery (recorded failed)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        if not addr.is_global or addr.is_multicast:
            return str(addr)
    return None


def check_urls(urls: list[str], *, allow_private: bool = False) -> bytes:
    """The secret, once the URLs and the secret are known to be usable (else UsageProblem:
    said before anything is surveyed). A URL whose host is loopback, link-local or private
    is refused unless ``allow_private`` (``--notify-private``)."""
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageProblem(f"--notify {masked(url)!r}: not an http(s) URL")
    secret = os.environ.get(SECRET_ENV, "")
    if not secret:
        raise UsageProblem(f"--notify needs a signing secret in ${SECRET_ENV} (receivers check "
                           f"{HEADER}: sha256=HMAC-SHA256(secret, body))")
    for url in urls:
        parts = urlsplit(url)
        internal = None if allow_private else internal_address(parts.hostname or "")
        if internal is not None:
            raise UsageProblem(f"--notify {masked(url)!r}: {parts.hostname} is {internal}, a loopback, link-local "
                               "or private address", hint="a receiver on this machine or its own network: add "
                                                          "--notify-private")
    backoff()  # a bad SURVEY_WEBHOOK_BACKOFF is said now too
    return secret.encode("utf-8")


def backoff() -> float:
    text = os.environ.get(BACKOFF_ENV)
    if not text:
        return BACKOFF_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_BACKOFF_S:
        raise UsageProblem(f"{BACKOFF_ENV}={text!r} is not a number of seconds between 0 and {MAX_BACKOFF_S:.0f}")
    return value


def sign(body: bytes, secret: bytes) -> str:
    """The ``X-Survey-Signature`` value of ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def masked(url: str) -> str:
    from survey.environments.discovery import mask

    return mask(url)


def payload(entries: list[dict[str, Any]], run_ids: list[int], *, now: dt.datetime | None = None) -> bytes:
    doc = {"event": EVENT, "schema": 1, "sent_at": (now or clock.now()).isoformat(timespec="seconds"),
           "runs": sorted(run_ids), "count": len(entries), "changes": entries}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


@dataclass
class Result:
    url: str  # masked
    status: str  # delivered | failed
    attempts: int
    http_status: int | None = None
    error: str | None = None
    started_at: dt.datetime = field(default_factory=clock.now)
    finished_at: dt.datetime = field(default_factory=clock.now)


def deliver(url: str, body: bytes, secret: bytes, *, attempts: int = ATTEMPTS, timeout: float = TIMEOUT_S,
            first_wait: float | None = None, sleep: Callable[[float], None] = time.sleep) -> Result:
    """POST ``body`` to ``url``, retried as the module says; never raises."""
    import httpx

    try:
        wait = backoff() if first_wait is None else first_wait
    except UsageProblem:
        wait = BACKOFF_S
    headers = {"Content-Type": "application/json", HEADER: sign(body, secret), "X-Survey-Event": EVENT,
               "X-Survey-Delivery": hashlib.sha256(body).hexdigest(), "User-Agent": "proton-survey"}
    result = Result(masked(url), "failed", 0)
    for attempt in range(1, attempts + 1):
        result.attempts = attempt
        retry = False
        try:
            with httpx.Client(timeout=timeout, follow_redirects=False) as client:
                r = client.post(url, content=body, headers=headers)
            result.http_status = r.status_code
            if 200 <= r.status_code < 300:
                result.status, result.error = "delivered", None
                break
            result.error = f"the receiver answered {r.status_code} {r.reason_phrase}".rstrip()
            retry = r.status_code >= 500 or r.status_code in RETRY_STATUSES
        except httpx.HTTPError as e:
            result.http_status = None
            result.error = f"{type(e).__name__}: {masked(str(e)) or 'no detail'}"
            retry = True
        except Exception as e:  # an invalid URL, ...: recorded, never raised into the survey
            result.error = f"{type(e).__name__}: {masked(str(e))}"
            retry = False
        if not retry or attempt == attempts:
            break
        sleep(min(wait * 2 ** (attempt - 1), MAX_BACKOFF_S))
    result.finished_at = clock.now()
    return result


def record(store: Store, result: Result, body: bytes, count: int, run_ids: list[int]) -> None:
    from db import models as m

    with store.session() as s:
        s.add(m.Delivery(url=result.url, status=result.status, attempts=result.attempts,
                         http_status=result.http_status, error=result.error, changes=count,
                         run_ids=sorted(run_ids), payload_sha256=hashlib.sha256(body).hexdigest(),
                         started_at=result.started_at, finished_at=result.finished_at))
        s.commit()


def notify(store: Store, urls: list[str], secret: bytes, run_ids: list[int], *,
           say: Callable[[str], None] = lambda _m: None) -> list[Result]:
    """Send what ``run_ids`` changed to every URL (in parallel), record each delivery and
    return the results (``say``: a delivery the store would not take); nothing at all
    when they changed nothing."""
    from survey.verdicts.changes import changes

    if not urls or not run_ids:
        return []
    with store.session() as s:
        entries = changes(s, runs=set(run_ids))
    if not entries:
        return []
    body = payload(entries, run_ids)
    results: list[Result | None] = [None] * len(urls)

    def one(i: int, url: str) -> None:
        results[i] = deliver(url, body, secret)

    threads = [threading.Thread(target=one, args=(i, u), daemon=True) for i, u in enumerate(urls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [r for r in results if r is not None]
    for r in done:
        try:
            record(store, r, body, len(entries), run_ids)
        except Exception as e:  # the store refused it: say so, never fail the survey
            say(f"webhook {r.url}: {r.status}, and it could not be recorded: {type(e).__name__}: {e}")
    return done


def announce(store: Store, before: str | None, run_ids: list[int], urls: list[str], secret: bytes,
             counts: dict[str, int], *, quiet: Callable[..., Any], loud: Callable[[str], None],
             quiet_run: bool) -> bool:
    """After ``survey run``: whether the survey changed the store (its matrix version moved
    from ``before``), said in one line when the run is quiet (a loud run said it already);
    what it changed sent to ``urls``, each delivery said (``quiet``; a failure ``loud``,
    even in a quiet run: it is recorded, and ``survey changes`` lists it)."""
    changed = matrix_version(store) != before
    if quiet_run and changed:
        loud("survey: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing to survey")
             + f"  (store: {store.url})")
    for r in notify(store, urls, secret, run_ids, say=loud):
        if r.status == "delivered":
            quiet(f"webhook {r.url}: delivered (HTTP {r.http_status})", markup=False, highlight=False)
        else:
            loud(f"webhook {r.url}: failed after {r.attempts} attempt(s): {r.error}")
    return changed


def matrix_version(store: Store) -> str | None:
    """The store's matrix version (it moves with every new run, failure or catalog change)."""
    from sqlalchemy import select

    from db import models as m
    from survey.evidence.ingest import MATRIX_VERSION

    with store.session() as s:
        return s.scalar(select(m.Meta.value).where(m.Meta.key == MATRIX_VERSION))


def failed_deliveries(store: Store, limit: int = 20) -> list[dict[str, Any]]:
    """The most recent failed deliveries, newest first."""
    from sqlalchemy import select

    from db import models as m
    from survey.evidence.queries import iso

    with store.session() as s:
        rows = s.scalars(select(m.Delivery).where(m.Delivery.status == "failed").order_by(m.Delivery.id.desc())
                         .limit(limit))
        return [{"id": d.id, "url": d.url, "attempts": d.attempts, "http_status": d.http_status, "error": d.error,
                 "changes": d.changes, "runs": d.run_ids, "date": iso(d.finished_at)} for d in rows]

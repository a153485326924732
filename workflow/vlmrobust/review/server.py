"""A local web server for human verification (standard library only).

``vlmrobust review --candidates C.jsonl --decisions D.csv [--port N]``
prints the URL of the review page; ``vlmrobust idis-review --manifest M --samples S
--decisions D.csv --set idis-perception|idis-math`` serves the same page for the images
of an Idis perturbation (candidates made by :func:`vlmrobust.review.idis.idis_candidates`,
the criteria of that set, :data:`~vlmrobust.core.decisions.CRITERIA_SETS`). Routes:

- ``GET /``: the review page (:mod:`vlmrobust.review.page`), rendered from the
  candidates and the decisions file as they are now.
- ``GET /image/<sample_id>/original`` and ``.../edited``: a candidate's images (only
  those, and only from the ``results/`` and ``resources/`` folders under the image base:
  a path with ``..`` or an absolute path elsewhere is a 403; nothing else on disk is
  reachable).
- ``GET /state``: ``{"decisions": {id: decision}, "counts": report}`` as JSON.
- ``POST /decision`` with a JSON body ``{"sample_id", "decision", "criteria", "note"}``
  (``decision``: ``accept``, ``reject``, or ``undecided`` to remove a decision;
  ``criteria``: the failed criterion ids; optional ``reviewer``, default the server's
  ``--reviewer``): validated like a row of the decisions file, then written to it
  atomically (the file is rewritten; one lock serializes writers). The answer is
  ``{"ok": true, "decision": {...} | null, "counts": report}``, or a 400 with
  ``{"error": message}``. A note over :data:`~vlmrobust.core.decisions.MAX_NOTE`
  characters is a 400, a body over :data:`MAX_BODY` bytes a 413, both before anything
  is written. Only ``Content-Type: application/json`` is accepted.

Writes need the session's token: a random string made when the server starts, printed
with its URL and embedded in the page it serves, which sends it in the
``X-Review-Token`` header; a POST without it is a 403. Every request must name the
server in its ``Host`` header (``127.0.0.1``, ``localhost`` or the ``--host``, with the
port), and an ``Origin`` header, when there is one, must be the server's own; else a
403. So another web site cannot write decisions, not even through DNS rebinding.

It binds 127.0.0.1 by default; on a cluster node, reach it through an SSH tunnel that
keeps the port number (``ssh -L PORT:127.0.0.1:PORT node``, then open
``http://localhost:PORT/``): the ``Host`` check refuses another port.

:class:`LocalServer` holds what every review server shares (the token, the ``Host`` and
``Origin`` checks, the image folders, the request handling); a server says what its
page, state, images and one POST endpoint are (:class:`ReviewServer` here, the
concept-family page of :mod:`vlmrobust.review.concepts`).
"""

from __future__ import annotations

import contextlib
import getpass
import hmac
import json
import logging
import mimetypes
import os
import secrets
import socket
import sys
import threading
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ..core.decisions import (
    DEFAULT_CRITERIA_SET,
    Candidate,
    DecisionError,
    apply_decisions,
    as_candidates,
    read_candidates,
    read_decisions,
    remove_decision,
    write_decision,
)
from .page import build_review_page, render_review_page

log = logging.getLogger("vlmrobust.review")

# A decision's body: a note of MAX_NOTE characters fits even \u-escaped.
MAX_BODY = 128 * 1024
TOKEN_HEADER = "X-Review-Token"
IMAGE_KINDS = ("original", "edited")
# The folders under the image base the server serves images from.
IMAGE_ROOTS = ("results", "resources")
_WILDCARD = ("0.0.0.0", "", "::")
_DRAIN_MAX = 16 << 20


def _default_reviewer() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return ""


def _candidate_list(candidates: str | Path | Iterable[Candidate]) -> list[Candidate]:
    """Candidates from a candidates JSONL path, or validated from the candidates given."""
    if isinstance(candidates, str | os.PathLike):
        return read_candidates(candidates)
    return as_candidates(candidates)


class LocalServer(ThreadingHTTPServer):
    """What every review server shares: the session token, the ``Host``/``Origin``
    checks and the image folders. A subclass sets :attr:`post_path` and
    :attr:`image_kinds` and implements :meth:`page`, :meth:`state_json`,
    :meth:`image_of` and :meth:`post`; ``url`` is where the page is, ``serve_forever()``
    runs it."""

    daemon_threads = True
    #: pending connections the kernel holds while the handlers are busy (socketserver's
    #: default, 5, reset a burst of requests from one page without an HTTP answer)
    request_queue_size = 256
    #: the one POST endpoint (a JSON body, the token in the X-Review-Token header)
    post_path: str
    #: the names ``GET /image/<key>/<kind>`` accepts
    image_kinds: tuple[str, ...]

    def __init__(self, host: str, port: int, image_base: str | Path | None) -> None:
        self.image_base = Path(image_base) if image_base is not None else Path.cwd()
        self.lock = threading.Lock()
        # The session's write token (printed with the URL, embedded in the page).
        self.token = secrets.token_urlsafe(32)
        super().__init__((host, port), ReviewHandler)
        self.allowed_hosts = self._allowed_hosts(host)

    # -- what a subclass says

    def page(self) -> str:
        """The HTML page for ``GET /``."""
        raise NotImplementedError

    def state_json(self) -> dict[str, Any]:
        """The JSON answer of ``GET /state``."""
        raise NotImplementedError

    def image_of(self, key: str, kind: str) -> str | None:
        """The image path of item ``key`` (``kind`` in :attr:`image_kinds`), or None when
        there is no such item."""
        raise NotImplementedError

    def post(self, body: Any) -> dict[str, Any]:
        """Validate and save one POST body; the JSON answer (a :class:`DecisionError`
        is a 400 with its message)."""
        raise NotImplementedError

    # -- shared

    def _allowed_hosts(self, host: str) -> frozenset[str]:
        """The ``Host`` values (lower case, with the port) that name this server."""
        bound, port = self.server_address[:2]
        names = {"127.0.0.1", "localhost", "::1", host, str(bound)}
        if host in _WILDCARD:
            names |= {socket.gethostname(), self.server_name}
        out: set[str] = set()
        for name in names - set(_WILDCARD):
            name = name.lower()
            name = f"[{name}]" if ":" in name and not name.startswith("[") else name
            out.add(f"{name}:{port}")
            if port == 80:
                out.add(name)
        return frozenset(out)

    def request_refused(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these ``Host`` and ``Origin`` headers is refused, or None."""
        if host is None or host.strip().lower() not in self.allowed_hosts:
            return f"Host {host!r} is not allowed (this server is {self.url})"
        if origin is not None:
            parts = urlsplit(origin.strip().lower())
            if parts.scheme != "http" or parts.netloc not in self.allowed_hosts:
                return f"Origin {origin!r} is not allowed (this server is {self.url})"
        return None

    def token_ok(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token.encode(), self.token.encode())

    def image_file(self, image: str) -> Path | None:
        """An image path as a file, if it lies under ``results/`` or ``resources/`` of
        the image base once every symbolic link is resolved (a link under ``results/``
        pointing elsewhere is refused; a ``results/`` that is itself a link to another
        disk is followed); no ``..`` either; else None."""
        path = Path(image)
        if ".." in path.parts:
            return None
        base = Path(os.path.abspath(self.image_base))
        file = (path if path.is_absolute() else base / path).resolve()
        if any(file.is_relative_to((base / root).resolve()) for root in IMAGE_ROOTS):
            return file
        return None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        if host in ("0.0.0.0", ""):
            host = socket.gethostname()
        return f"http://{host}:{port}/"


class ReviewServer(LocalServer):
    """The review server of candidates and a decisions file under one criteria set; a
    bound, not yet running server (port 0: any free port; see ``.url``).

    ``candidates_path`` is a candidates JSONL, or the candidates themselves (the Idis
    review builds them from a variant manifest); ``criteria_set`` names the criteria the
    page shows and the decisions are validated against."""

    post_path = "/decision"
    image_kinds = IMAGE_KINDS

    def __init__(
        self,
        candidates_path: str | Path | Iterable[Candidate],
        decisions_path: str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        image_base: str | Path | None = None,
        reviewer: str | None = None,
        criteria_set: str = DEFAULT_CRITERIA_SET,
        title: str | None = None,
    ) -> None:
        self.criteria_set = criteria_set
        self.title = title
        self.candidates = _candidate_list(candidates_path)
        self.by_id = {c.sample_id: c for c in self.candidates}
        self.known_ids = frozenset(self.by_id)
        self.decisions_path = Path(decisions_path)
        self.reviewer = _default_reviewer() if reviewer is None else reviewer
        # Fail now, not on the first click, if the decisions file does not validate.
        read_decisions(
            self.decisions_path, self.known_ids, missing_ok=True, criteria_set=criteria_set
        )
        super().__init__(host, port, image_base)

    def state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The decisions now in the file and the verification report."""
        decisions = read_decisions(
            self.decisions_path, self.known_ids, missing_ok=True, criteria_set=self.criteria_set
        )
        _, report = apply_decisions(self.candidates, decisions, criteria_set=self.criteria_set)
        return decisions, report

    def page(self) -> str:
        decisions, _ = self.state()
        return render_review_page(
            self.candidates,
            decisions,
            image_src=lambda c, which: f"image/{quote(c.sample_id, safe='')}/{which}",
            live=True,
            token=self.token,
            criteria_set=self.criteria_set,
            title=self.title,
        )

    def state_json(self) -> dict[str, Any]:
        decisions, report = self.state()
        return {"decisions": {k: d.to_dict() for k, d in decisions.items()}, "counts": report}

    def image_of(self, key: str, kind: str) -> str | None:
        cand = self.by_id.get(key)
        return None if cand is None else getattr(cand, f"{kind}_image")

    def post(self, body: Any) -> dict[str, Any]:
        """Validate and save one decision from a POST body; the JSON answer."""
        if not isinstance(body, dict):
            raise DecisionError("the body must be a JSON object")
        sample_id = body.get("sample_id")
        decision = body.get("decision")
        criteria = body.get("criteria", [])
        note = body.get("note", "")
        reviewer = body.get("reviewer") or self.reviewer
        if not isinstance(sample_id, str) or sample_id not in self.known_ids:
            raise DecisionError(f"unknown sample id {sample_id!r}")
        if not isinstance(criteria, list):
            raise DecisionError(f"criteria must be a list of criterion ids, got {criteria!r}")
        if not isinstance(note, str) or not isinstance(reviewer, str):
            raise DecisionError("note and reviewer must be text")
        with self.lock:
            if decision == "undecided":
                decisions = remove_decision(
                    self.decisions_path, sample_id, criteria_set=self.criteria_set
                )
            else:
                decisions = write_decision(
                    self.decisions_path,
                    sample_id,
                    decision,
                    criteria,
                    note,
                    reviewer,
                    known_ids=self.known_ids,
                    criteria_set=self.criteria_set,
                )
        _, report = apply_decisions(self.candidates, decisions, criteria_set=self.criteria_set)
        saved = decisions.get(sample_id)
        log.info("%s: %s", sample_id, saved.decision if saved else "undecided")
        return {"ok": True, "decision": saved.to_dict() if saved else None, "counts": report}


class ReviewHandler(BaseHTTPRequestHandler):
    server: LocalServer
    server_version = "vlmrobust-review"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib name)
        log.debug("%s %s", self.address_string(), format % args)

    # -- replies

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False).encode(), "application/json")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"ok": False, "error": message})

    # -- routes

    def _refused(self) -> bool:
        """Answer 403 to a request naming another host or coming from another origin."""
        why = self.server.request_refused(self.headers.get("Host"), self.headers.get("Origin"))
        if why is not None:
            log.warning("refused %s %s: %s", self.command, self.path, why)
            self._error(HTTPStatus.FORBIDDEN, why)
        return why is not None

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        if self._refused():
            return
        path = urlsplit(self.path).path
        try:
            if path in ("/", "/index.html"):
                page = self.server.page()
                self._send(HTTPStatus.OK, page.encode(), "text/html; charset=utf-8")
            elif path == "/state":
                self._json(HTTPStatus.OK, self.server.state_json())
            elif path.startswith("/image/"):
                self._image(path)
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")
        except DecisionError as exc:  # the decisions file was edited into an invalid state
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))
        except Exception as exc:  # answer, never leave the browser waiting
            log.exception("GET %s failed", path)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    do_HEAD = do_GET

    def _image(self, path: str) -> None:
        parts = path[len("/image/") :].split("/")
        if len(parts) != 2 or parts[1] not in self.server.image_kinds:
            self._error(HTTPStatus.NOT_FOUND, f"no such image: {path}")
            return
        key = unquote(parts[0])
        image = self.server.image_of(key, parts[1])
        if image is None:
            self._error(HTTPStatus.NOT_FOUND, f"no such sample: {key!r}")
            return
        file = self.server.image_file(image)
        if file is None:
            log.warning("%s: %s image outside results/ and resources/: %s", *parts, image)
            self._error(
                HTTPStatus.FORBIDDEN,
                f"image {image!r} is not under {' or '.join(IMAGE_ROOTS)} of the image base",
            )
            return
        try:
            data = file.read_bytes()
        except OSError:
            log.warning("%s: %s image not found: %s", key, parts[1], file)
            self._error(HTTPStatus.NOT_FOUND, f"image not found: {file}")
            return
        mime = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        self._send(HTTPStatus.OK, data, mime)

    def do_POST(self) -> None:  # noqa: N802 (stdlib name)
        if self._refused():
            return
        if urlsplit(self.path).path != self.server.post_path:
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: {self.path}")
            return
        if not self.server.token_ok(self.headers.get(TOKEN_HEADER)):
            log.warning("refused POST %s: no or a wrong %s", self.path, TOKEN_HEADER)
            self._error(
                HTTPStatus.FORBIDDEN,
                f"missing or wrong {TOKEN_HEADER} (the session token the server printed)",
            )
            return
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            self._error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send application/json")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._error(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
            return
        if length > MAX_BODY:
            # Drain a moderate body so the client reads the answer (not a reset); close
            # the connection on a bigger one instead of reading it.
            left = length if length <= _DRAIN_MAX else 0
            while left > 0 and (chunk := self.rfile.read(min(left, 1 << 16))):
                left -= len(chunk)
            self.close_connection = True
            self._error(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"body of {length} bytes is too large (at most {MAX_BODY})",
            )
            return
        if length <= 0:
            self._error(HTTPStatus.BAD_REQUEST, "empty body")
            return
        try:
            body = json.loads(self.rfile.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"body is not valid JSON: {exc}")
            return
        try:
            answer = self.server.post(body)
        except DecisionError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        except Exception as exc:  # answer, never leave the browser waiting
            log.exception("POST %s failed", self.path)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            return
        self._json(HTTPStatus.OK, answer)


#: a bound, not yet running server (port 0: any free port; see ``.url``)
make_server = ReviewServer


def run_server(server: LocalServer, what: str = "decision") -> None:
    """Print a bound server's URL and token, then serve until interrupted."""
    with server:
        print(f"Review page: {server.url}  (Ctrl-C to stop)", flush=True)
        print(
            f"Session token: {server.token}  (the page sends it with each {what}; "
            f"other clients send it as the {TOKEN_HEADER} header)",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


def serve(*args: Any, **kwargs: Any) -> None:
    """Run a :class:`ReviewServer` (made from these arguments) until interrupted; prints
    its URL first and the verification counts last."""
    server = ReviewServer(*args, **kwargs)
    run_server(server)
    _, report = server.state()
    print(_summary(report), flush=True)


def _summary(report: dict[str, Any]) -> str:
    crit = ", ".join(f"{k} {v}" for k, v in report["rejected_by_criterion"].items())
    return (
        f"generated {report['generated']}, accepted {report['accepted']}, "
        f"rejected {report['rejected']} ({crit}), undecided {report['undecided']}"
    )


def review(
    candidates: str | Path | Iterable[Candidate],
    decisions: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    image_base: str | None = None,
    reviewer: str | None = None,
    page: str | None = None,
    report: bool = False,
    criteria_set: str = DEFAULT_CRITERIA_SET,
    title: str | None = None,
) -> int:
    """``vlmrobust review``: serve the review page (until interrupted), or with ``page``
    write a static read-only page, or with ``report`` print the verification report as
    JSON. Returns the exit status (2 with the message on a bad decisions file).

    ``candidates`` is a candidates JSONL or the candidates themselves (``vlmrobust
    idis-review`` passes those of a variant manifest, with its ``criteria_set``)."""
    try:
        rows = _candidate_list(candidates)
        found = read_decisions(
            decisions, [c.sample_id for c in rows], missing_ok=True, criteria_set=criteria_set
        )
        if report or page:
            if page:
                out = build_review_page(
                    rows,
                    found,
                    page,
                    image_base=image_base,
                    criteria_set=criteria_set,
                    title=title,
                )
                print(f"wrote {out}")
            if report:
                _, counts = apply_decisions(rows, found, criteria_set=criteria_set)
                print(json.dumps(counts, indent=2))
            return 0
        serve(
            rows,
            decisions,
            host,
            port,
            image_base=image_base,
            reviewer=reviewer,
            criteria_set=criteria_set,
            title=title,
        )
    except (DecisionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0

"""A local web server for human verification (standard library only).

``vlmrobust review --candidates C.jsonl --decisions D.csv [--port N]``
prints the URL of the review page. Routes:

- ``GET /``: the review page (:mod:`vlmrobust.review.page`), rendered from the
  candidates and the decisions file as they are now.
- ``GET /image/<sample_id>/original`` and ``.../edited``: a candidate's images (only
  those; nothing else on disk is reachable).
- ``GET /state``: ``{"decisions": {id: decision}, "counts": report}`` as JSON.
- ``POST /decision`` with a JSON body ``{"sample_id", "decision", "criteria", "note"}``
  (``decision``: ``accept``, ``reject``, or ``undecided`` to remove a decision;
  ``criteria``: the failed criterion ids; optional ``reviewer``, default the server's
  ``--reviewer``): validated like a row of the decisions file, then written to it
  atomically (the file is rewritten; one lock serializes writers). The answer is
  ``{"ok": true, "decision": {...} | null, "counts": report}``, or a 400 with
  ``{"error": message}``. Only ``Content-Type: application/json`` is accepted, so a page
  from another origin cannot post a decision without a CORS preflight (never granted).

It binds 127.0.0.1 by default; on a cluster node, reach it through an SSH tunnel.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import logging
import mimetypes
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ..core.decisions import (
    Candidate,
    DecisionError,
    apply_decisions,
    read_candidates,
    read_decisions,
    remove_decision,
    write_decision,
)
from .page import build_review_page, render_review_page, resolve_image

log = logging.getLogger("vlmrobust.review")

MAX_BODY = 1 << 20
IMAGE_KINDS = ("original", "edited")


def _default_reviewer() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return ""


class ReviewServer(ThreadingHTTPServer):
    """The review server; ``url`` is where the page is, ``serve_forever()`` runs it."""

    daemon_threads = True

    def __init__(
        self,
        candidates_path: str | Path,
        decisions_path: str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        image_base: str | Path | None = None,
        reviewer: str | None = None,
    ) -> None:
        self.candidates: list[Candidate] = read_candidates(candidates_path)
        self.by_id = {c.sample_id: c for c in self.candidates}
        self.known_ids = frozenset(self.by_id)
        self.decisions_path = Path(decisions_path)
        self.image_base = Path(image_base) if image_base is not None else Path.cwd()
        self.reviewer = _default_reviewer() if reviewer is None else reviewer
        self.lock = threading.Lock()
        # Fail now, not on the first click, if the decisions file does not validate.
        read_decisions(self.decisions_path, self.known_ids, missing_ok=True)
        super().__init__((host, port), ReviewHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        if host in ("0.0.0.0", ""):
            host = socket.gethostname()
        return f"http://{host}:{port}/"

    def state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The decisions now in the file and the verification report."""
        decisions = read_decisions(self.decisions_path, self.known_ids, missing_ok=True)
        _, report = apply_decisions(self.candidates, decisions)
        return decisions, report

    def decide(self, body: Any) -> dict[str, Any]:
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
                decisions = remove_decision(self.decisions_path, sample_id)
            else:
                decisions = write_decision(
                    self.decisions_path,
                    sample_id,
                    decision,
                    criteria,
                    note,
                    reviewer,
                    known_ids=self.known_ids,
                )
        _, report = apply_decisions(self.candidates, decisions)
        saved = decisions.get(sample_id)
        log.info("%s: %s", sample_id, saved.decision if saved else "undecided")
        return {"ok": True, "decision": saved.to_dict() if saved else None, "counts": report}


class ReviewHandler(BaseHTTPRequestHandler):
    server: ReviewServer
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

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        path = urlsplit(self.path).path
        try:
            if path in ("/", "/index.html"):
                decisions, _ = self.server.state()
                page = render_review_page(
                    self.server.candidates,
                    decisions,
                    image_src=lambda c, which: f"image/{quote(c.sample_id, safe='')}/{which}",
                    live=True,
                )
                self._send(HTTPStatus.OK, page.encode(), "text/html; charset=utf-8")
            elif path == "/state":
                decisions, report = self.server.state()
                body = {"decisions": {k: d.to_dict() for k, d in decisions.items()}}
                self._json(HTTPStatus.OK, {**body, "counts": report})
            elif path.startswith("/image/"):
                self._image(path)
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")
        except DecisionError as exc:  # the decisions file was edited into an invalid state
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))

    do_HEAD = do_GET

    def _image(self, path: str) -> None:
        parts = path[len("/image/") :].split("/")
        if len(parts) != 2 or parts[1] not in IMAGE_KINDS:
            self._error(HTTPStatus.NOT_FOUND, f"no such image: {path}")
            return
        cand = self.server.by_id.get(unquote(parts[0]))
        if cand is None:
            self._error(HTTPStatus.NOT_FOUND, f"no such sample: {unquote(parts[0])!r}")
            return
        file = resolve_image(getattr(cand, f"{parts[1]}_image"), self.server.image_base)
        try:
            data = file.read_bytes()
        except OSError:
            log.warning("%s: %s image not found: %s", cand.sample_id, parts[1], file)
            self._error(HTTPStatus.NOT_FOUND, f"image not found: {file}")
            return
        mime = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        self._send(HTTPStatus.OK, data, mime)

    def do_POST(self) -> None:  # noqa: N802 (stdlib name)
        if urlsplit(self.path).path != "/decision":
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: {self.path}")
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
        if not 0 < length <= MAX_BODY:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body of {length} bytes")
            return
        try:
            body = json.loads(self.rfile.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"body is not valid JSON: {exc}")
            return
        try:
            answer = self.server.decide(body)
        except DecisionError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        self._json(HTTPStatus.OK, answer)


def make_server(
    candidates_path: str | Path,
    decisions_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    image_base: str | Path | None = None,
    reviewer: str | None = None,
) -> ReviewServer:
    """A bound, not yet running server (port 0: any free port; see ``.url``)."""
    return ReviewServer(
        candidates_path, decisions_path, host, port, image_base=image_base, reviewer=reviewer
    )


def serve(
    candidates_path: str | Path,
    decisions_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    image_base: str | Path | None = None,
    reviewer: str | None = None,
) -> None:
    """Run the review server until interrupted; prints its URL first."""
    server = make_server(
        candidates_path, decisions_path, host, port, image_base=image_base, reviewer=reviewer
    )
    with server:
        print(f"Review page: {server.url}  (Ctrl-C to stop)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    _, report = server.state()
    print(_summary(report), flush=True)


def _summary(report: dict[str, Any]) -> str:
    crit = ", ".join(f"{k} {v}" for k, v in report["rejected_by_criterion"].items())
    return (
        f"generated {report['generated']}, accepted {report['accepted']}, "
        f"rejected {report['rejected']} ({crit}), undecided {report['undecided']}"
    )


def review(
    candidates: str | Path,
    decisions: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    image_base: str | None = None,
    reviewer: str | None = None,
    page: str | None = None,
    report: bool = False,
) -> int:
    """``vlmrobust review``: serve the review page (until interrupted), or with ``page``
    write a static read-only page, or with ``report`` print the verification report as
    JSON. Returns the exit status (2 with the message on a bad decisions file)."""
    try:
        rows = read_candidates(candidates)
        found = read_decisions(decisions, [c.sample_id for c in rows], missing_ok=True)
        if report or page:
            if page:
                out = build_review_page(rows, found, page, image_base=image_base)
                print(f"wrote {out}")
            if report:
                _, counts = apply_decisions(rows, found)
                print(json.dumps(counts, indent=2))
            return 0
        serve(candidates, decisions, host, port, image_base=image_base, reviewer=reviewer)
    except (DecisionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0

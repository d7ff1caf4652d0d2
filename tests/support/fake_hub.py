"""A local HTTP server that answers like the Hugging Face hub (no network needed).

Model info, tree listing and file resolve; errors with the hub's status codes and its
``X-Error-Code`` / ``X-Error-Message`` headers (401 ``RepoNotFound`` without a token and 404
with one for a missing or private repo, 401 / 403 ``GatedRepo``, 401 "Invalid credentials in
Authorization header" for a bad token, 404 ``RevisionNotFound`` / ``EntryNotFound``), so
huggingface_hub's own ``hf_raise_for_status`` raises its real error classes with their real
messages. Point ``HF_ENDPOINT`` at :attr:`FakeHub.url`. Used by ``tests/weights/test_weights.py``
(the helpers' own downloads) and ``tests/support/record_logs.py`` (a vLLM server's own download).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclasses.dataclass
class Repo:
    commit: str
    files: dict[str, bytes]
    gated: bool = False
    accepted_tokens: tuple[str, ...] = ()
    info: dict | None = None  # a recorded model_info answer to serve instead


def _sha1(b: bytes) -> str:
    return hashlib.sha1(b).hexdigest()


class FakeHub:
    """Answers the hub endpoints ``model_info``, ``snapshot_download`` and ``hf_hub_download`` use."""

    def __init__(self):
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_HEAD(self):
                hub.handle(self, head=True)

            def do_GET(self):
                hub.handle(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def add(self, repo: str, files: dict[str, bytes], commit: str | None = None, **kw) -> Repo:
        r = Repo(commit or _sha1(repo.encode()), files, **kw)
        self.repos[repo] = r
        return r

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    # -- responses --
    def _send(self, h, status, body=b"", headers=None, head=False):
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def _error(self, h, status, code, message, head):
        body = json.dumps({"error": message}).encode()
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(h, status, body, headers, head)

    def handle(self, h, head):
        path = unquote(urlsplit(h.path).path)
        self.requests.append((h.command, path))
        auth = h.headers.get("authorization") or ""
        token = auth.removeprefix("Bearer ").strip() or None
        m = (
            re.match(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)", path)
            or re.match(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$", path)
            or re.match(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$", path)
        )
        if not m:
            return self._error(h, 404, None, "Not Found", head)
        if token == "hf_invalid":
            return self._error(h, 401, None, "Invalid credentials in Authorization header", head)
        name = m.group("repo")
        repo = self.repos.get(name)
        if repo is None:
            # The hub answers 401 without a token and 404 with one (private or missing).
            return self._error(
                h, 404 if token else 401, "RepoNotFound", "Repository not found", head
            )
        if repo.gated and token not in repo.accepted_tokens:
            if token:
                msg = (
                    f"Access to model {name} is restricted and you are not in the authorized list. "
                    f"Visit {self.url}/{name} to ask for access."
                )
                return self._error(h, 403, "GatedRepo", msg, head)
            msg = (
                f"Access to model {name} is restricted. You must have access to it and be "
                "authenticated to access it. Please log in."
            )
            return self._error(h, 401, "GatedRepo", msg, head)
        rev = m.group("rev")
        if rev not in (None, "main", repo.commit):
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        headers = {"X-Repo-Commit": repo.commit}
        if "/tree/" in path:
            listing = [
                self._entry(n, b) | {"type": "file", "path": n}
                for n, b in sorted(repo.files.items())
            ]
            return self._send(
                h,
                200,
                json.dumps(listing).encode(),
                {**headers, "Content-Type": "application/json"},
                head,
            )
        if path.startswith("/api/models/"):
            info = repo.info or {
                "_id": "0" * 24,
                "id": name,
                "modelId": name,
                "sha": repo.commit,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "tags": [],
                "siblings": [
                    {
                        "rfilename": n,
                        "size": len(b),
                        "blobId": _sha1(b),
                        **({"lfs": self._lfs(b)} if n.endswith(".safetensors") else {}),
                    }
                    for n, b in sorted(repo.files.items())
                ],
            }
            return self._send(
                h,
                200,
                json.dumps(info).encode(),
                {**headers, "Content-Type": "application/json"},
                head,
            )
        fname = m.group("file")
        if fname not in repo.files:
            return self._error(h, 404, "EntryNotFound", "Entry not found", head)
        body = repo.files[fname]
        etag = hashlib.sha256(body).hexdigest() if fname.endswith(".safetensors") else _sha1(body)
        return self._send(h, 200, body, {**headers, "ETag": f'"{etag}"'}, head)

    @staticmethod
    def _lfs(b: bytes) -> dict:
        return {"size": len(b), "sha256": hashlib.sha256(b).hexdigest(), "pointerSize": 134}

    def _entry(self, n: str, b: bytes) -> dict:
        e = {"oid": _sha1(b), "size": len(b)}
        if n.endswith(".safetensors"):
            e["lfs"] = {"oid": hashlib.sha256(b).hexdigest(), "size": len(b), "pointerSize": 134}
        return e

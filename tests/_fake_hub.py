"""A fake Hugging Face Hub on 127.0.0.1 for ``liuyi pull`` tests, answering what huggingface_hub
2.x asks (read in ``huggingface_hub/hf_api.py`` ``model_info`` and ``file_download.py``):

* ``GET /api/models/{repo}[/revision/{rev}]`` -> ``{"id", "sha", "siblings": [...]}``;
  unknown repo -> 404 ``X-Error-Code: RepoNotFound``, unknown revision -> 404 ``RevisionNotFound``;
* ``HEAD /{repo}/resolve/{rev}/{file}`` -> ``X-Repo-Commit``, ``ETag`` (git blob sha1, or sha256 for
  LFS files with ``X-Linked-Etag``/``X-Linked-Size``), ``Content-Length``; no ``X-Xet-Hash``, so
  huggingface_hub takes the plain HTTP path, never Xet;
* ``GET`` of the same URL, honouring ``Range: bytes=N-`` (206 + ``Content-Range``), which is how
  huggingface_hub resumes a download whose connection was cut;
* ``GET /api/models/{repo}/discussions`` -> open pull requests (the safetensors conversion bot's).

Every request is recorded, so tests can say exactly what was (and was not) downloaded.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".h5", ".ot", ".spm", ".model")


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    commit: str = field(default_factory=lambda: hashlib.sha1(b"liuyi-fake-commit").hexdigest())
    branches: tuple[str, ...] = ("main",)
    pull_requests: list[FakePullRequest] = field(default_factory=list)  # revisions refs/pr/<num>

    def at(self, revision: str | None) -> FakeRepo | None:
        """The repo state a revision (branch, commit, refs/pr/N) names; None if it names none."""
        if revision is None or revision in (*self.branches, self.commit):
            return self
        for pr in self.pull_requests:
            if revision in (f"refs/pr/{pr.num}", pr.state.commit):
                return pr.state
        return None


@dataclass
class FakePullRequest:
    num: int
    author: str
    title: str
    state: FakeRepo  # the repo as the pull request's head has it


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None


class FakeHub:
    """``with FakeHub() as hub: hub.repos["org/name"] = FakeRepo(...)``; ``hub.url`` is HF_ENDPOINT."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Request] = []
        self.cut_once: set[tuple[str, str]] = set()  # (repo, file): first GET stops halfway
        self.gated: set[str] = set()  # repos that answer 403 GatedRepo (terms not accepted)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add_checkpoint(
        self, repo: str, directory: Path, *, extra: dict[str, bytes] | None = None
    ) -> FakeRepo:
        files = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
        self.repos[repo] = FakeRepo(files={**files, **(extra or {})})
        return self.repos[repo]

    def downloads(self) -> list[str]:
        """Files fetched with GET (resolve URLs), in order."""
        return [
            r.path.rsplit("/resolve/", 1)[1].split("/", 1)[1]
            for r in self.requests
            if r.method == "GET" and "/resolve/" in r.path
        ]

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _etag(name: str, content: bytes) -> tuple[str, bool]:
    if name.endswith(LFS_SUFFIXES):
        return hashlib.sha256(content).hexdigest(), True
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest(), False


_API = re.compile(r"/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?")
_DISCUSSIONS = re.compile(r"/api/models/(?P<repo>[^/]+/[^/]+)/discussions")
_RESOLVE = re.compile(r"/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)")


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            return

        def do_GET(self) -> None:
            self._answer(head=False)

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def _answer(self, *, head: bool) -> None:
            raw = urlsplit(self.path).path  # revisions come quoted: refs%2Fpr%2F1
            hub.record(Request(self.command, unquote(raw), self.headers.get("Range")))
            if match := _DISCUSSIONS.fullmatch(raw):
                return self._discussions(unquote(match["repo"]))
            if match := _API.fullmatch(raw):
                return self._model_info(unquote(match["repo"]), match["rev"] and unquote(match["rev"]))
            if match := _RESOLVE.fullmatch(raw):
                return self._file(
                    unquote(match["repo"]), unquote(match["rev"]), unquote(match["file"]), head=head
                )
            self._send(404, {"X-Error-Code": "EntryNotFound"}, b'{"error": "not a hub endpoint"}')

        def _repo(self, repo: str, revision: str | None) -> FakeRepo | None:
            found = hub.repos.get(repo)
            if repo in hub.gated:
                self._send(403, {"X-Error-Code": "GatedRepo"}, b'{"error": "Access to model is restricted"}')
                return None
            if found is None:
                self._send(404, {"X-Error-Code": "RepoNotFound"}, b'{"error": "Repository not found"}')
                return None
            state = found.at(revision)
            if state is None:
                self._send(
                    404,
                    {"X-Error-Code": "RevisionNotFound", "X-Repo-Commit": found.commit},
                    b'{"error": "Invalid rev id"}',
                )
            return state

        def _discussions(self, repo: str) -> None:
            found = self._repo(repo, None)
            if found is None:
                return
            listed = [
                {
                    "title": pr.title,
                    "num": pr.num,
                    "author": {"name": pr.author},
                    "createdAt": "2024-01-01T00:00:00.000Z",
                    "status": "open",
                    "repo": {"name": repo, "type": "model"},
                    "isPullRequest": True,
                }
                for pr in found.pull_requests
            ]
            body = json.dumps({"count": len(listed), "start": 0, "discussions": listed})
            self._send(200, {"Content-Type": "application/json"}, body.encode())

        def _model_info(self, repo: str, revision: str | None) -> None:
            found = self._repo(repo, revision)
            if found is None:
                return
            siblings = []
            for name, content in found.files.items():
                etag, lfs = _etag(name, content)
                sibling: dict[str, object] = {"rfilename": name, "size": len(content)}
                if lfs:
                    sibling["lfs"] = {"sha256": etag, "size": len(content), "pointerSize": 134}
                siblings.append(sibling)
            body = json.dumps({"id": repo, "modelId": repo, "sha": found.commit, "siblings": siblings})
            self._send(200, {"Content-Type": "application/json"}, body.encode())

        def _file(self, repo: str, revision: str, name: str, *, head: bool) -> None:
            found = self._repo(repo, revision)
            if found is None:
                return
            content = found.files.get(name)
            headers = {"X-Repo-Commit": found.commit}
            if content is None:
                self._send(404, {**headers, "X-Error-Code": "EntryNotFound"}, b'{"error": "Entry not found"}')
                return
            etag, lfs = _etag(name, content)
            headers.update({"ETag": f'"{etag}"', "Accept-Ranges": "bytes"})
            if lfs:
                headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(content))})
            if head:
                self._send(200, headers, content, body=False)
                return
            start = 0
            if match := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or ""):
                start = int(match[1])
                headers["Content-Range"] = f"bytes {start}-{len(content) - 1}/{len(content)}"
            status = 206 if start else 200
            if (repo, name) in hub.cut_once and not start:
                hub.cut_once.discard((repo, name))
                # promise the whole file, send half, hang up: the client sees an incomplete body
                self._send(status, headers, content, body=False)
                self.wfile.write(content[: len(content) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self._send(status, headers, content[start:])

        def _send(self, status: int, headers: dict[str, str], content: bytes, *, body: bool = True) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            if body:
                self.wfile.write(content)

    return Handler

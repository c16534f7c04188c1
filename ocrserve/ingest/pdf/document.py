"""Open PDFs, kept for the pages that follow, in the process that reads them (a render worker, a lite
worker): pypdfium2 is not thread-safe, so each process has its own; `PDFIUM_LOCK` serialises pdfium
for in-process use. Each use keeps its own documents (`cache`): the renderer flattens the pages it
renders (as Chandra's client does), which must not change what the text layer reads.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ocrserve.errors import OcrserveError

PDFIUM_LOCK = threading.Lock()
_MAX_OPEN = 4
_CACHES: dict[str, OrderedDict[tuple[str, float, str | None], Any]] = {}
_KEPT_OPEN: list[dict] = []  # caches of open PDFs (values) closed at exit
_ON_CLOSE: dict[str, list[Callable[[Any], None]]] = {}  # per cache: what forgets a document closed


class DocumentError(OcrserveError):
    """A document that cannot be read at all; the message says why. `sha256`: the file's hash when it
    was read before the error (an encrypted PDF without its password), so a finished output of this
    very file can still be recognised."""

    def __init__(self, message: str, sha256: str | None = None) -> None:
        super().__init__(message)
        self.sha256 = sha256

    def __reduce__(self):  # keep sha256 across processes
        return (type(self), (str(self), self.sha256))


def close_at_exit(cache: dict) -> None:
    """Close the PDFs left in `cache` at exit, before pypdfium2's own exit hook, which reports each one
    "still open" on stderr: call it after importing pypdfium2 (atexit runs the later-registered first)."""
    if not _KEPT_OPEN:
        atexit.register(_close_kept)
    if all(c is not cache for c in _KEPT_OPEN):
        _KEPT_OPEN.append(cache)


def _close_kept() -> None:
    for cache in _KEPT_OPEN:
        while cache:
            try:
                cache.popitem()[1].close()
            except Exception:  # noqa: BLE001 - closing at exit: nothing to report to
                pass


def on_close(cache: str, hook: Callable[[Any], None]) -> None:
    """Call `hook(doc)` before a document of `cache` is closed (state kept per document is dropped)."""
    hooks = _ON_CLOSE.setdefault(cache, [])
    if hook not in hooks:
        hooks.append(hook)


def _close(doc: Any, cache: str) -> None:
    for hook in _ON_CLOSE.get(cache, []):
        hook(doc)
    try:
        doc.close()
    except Exception:  # noqa: BLE001 - a document pdfium already let go of
        pass


def open_pdf(path: str, password: str | None, cache: str = "render") -> Any:
    """The PDF at `path` as a pypdfium2 document (forms initialised), opened once per process and `cache`;
    DocumentError with the reason when it cannot be opened. A file changed since it was opened is opened
    again; documents of files that no longer exist are closed (their disk space is not held)."""
    import pypdfium2 as pdfium

    docs = _CACHES.setdefault(cache, OrderedDict())
    close_at_exit(docs)
    for k in [k for k in docs if k[0] != path and not os.path.exists(k[0])]:
        _close(docs.pop(k), cache)
    try:
        key = (path, os.path.getmtime(path), password)
    except OSError:
        raise DocumentError(f"no such file: {path}") from None
    doc = docs.get(key)
    if doc is not None:
        docs.move_to_end(key)
        return doc
    for k in [k for k in docs if k[0] == path]:  # an older version of the file
        _close(docs.pop(k), cache)
    try:
        doc = pdfium.PdfDocument(path, password=password)
    except pdfium.PdfiumError as e:
        msg = str(e)
        if "password" in msg.lower():
            raise DocumentError(
                "encrypted PDF: wrong password" if password else "encrypted PDF: a password is needed (--password)"
            ) from None
        raise DocumentError(f"corrupt or unreadable PDF ({msg})") from None
    try:
        doc.init_forms()  # form fields are drawn (the renderer flattens them into the page, as upstream does)
    except Exception:  # noqa: BLE001 - forms are optional
        pass
    docs[key] = doc
    while len(docs) > _MAX_OPEN:
        _close(docs.popitem(last=False)[1], cache)
    return doc


def forget(path: str) -> None:
    """Close the documents of `path` this process holds open (the document is finished)."""
    for cache, docs in _CACHES.items():
        for key in [k for k in docs if k[0] == path]:
            _close(docs.pop(key), cache)

"""Office documents (DOCX, PPTX, XLSX, ODT/ODP/ODS, RTF, HTML, and the older DOC/XLS/PPT) as PDFs made
by LibreOffice, so the renderer, the lite engine and the searchable PDF read pages as they do a PDF's.

LibreOffice runs headless, per batch of files (`prepare`, before a run opens them; one file at a time
when a document is opened that no batch converted: `pdf_for`), each time with its own profile folder
and under a timeout (`Settings.office_timeout_s`, per file). Each PDF is kept in a cache folder under
the temp folder, named by the source file's absolute path, size and modification time, where every
process of a run finds it; the Document's source stays the original file with its own type ("docx").

LibreOffice runs without network unless `Settings.office_network` allows it (ingest/offline.py): a
document's remote images and links are not fetched, so no document can make this machine call URLs.

A file that cannot be converted fails alone with its reason: corrupt (not the zip archive an OOXML or
OpenDocument file is), password-protected (an encrypted OOXML file is an OLE container, an encrypted
OpenDocument file says so in its manifest), or one LibreOffice could not load. No LibreOffice on PATH
is one line naming the Debian package to install.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Iterable
from pathlib import Path

from ocrserve.ingest.offline import offline_prefix
from ocrserve.ingest.pdf.document import DocumentError

log = logging.getLogger(__name__)

# file suffix -> document type (the Document's source.type)
OFFICE_EXTENSIONS = {
    ".docx": "docx",
    ".docm": "docx",
    ".dotx": "docx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".pptx": "pptx",
    ".pptm": "pptx",
    ".odt": "odt",
    ".ods": "ods",
    ".odp": "odp",
    ".rtf": "rtf",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".doc": "doc",
    ".xls": "xls",
    ".ppt": "ppt",
}
OFFICE_TYPES = frozenset(OFFICE_EXTENSIONS.values())
# the Debian package whose LibreOffice component reads each type (each brings libreoffice-core)
PACKAGES = {
    **dict.fromkeys(("docx", "odt", "rtf", "html", "doc"), "libreoffice-writer"),
    **dict.fromkeys(("xlsx", "ods", "xls"), "libreoffice-calc"),
    **dict.fromkeys(("pptx", "odp", "ppt"), "libreoffice-impress"),
}
_ZIPPED = {"docx", "xlsx", "pptx", "odt", "ods", "odp"}
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ODF = {
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.presentation": "odp",
}
_OOXML = (
    ("wordprocessingml", "docx"),
    ("ms-word.", "docx"),
    ("spreadsheetml", "xlsx"),
    ("ms-excel.", "xlsx"),
    ("presentationml", "pptx"),
    ("ms-powerpoint.", "pptx"),
)
_OLE_STREAMS = (("WordDocument", "doc"), ("Workbook", "xls"), ("Book", "xls"), ("PowerPoint Document", "ppt"))
BATCH = 16  # files per LibreOffice start
DEFAULT_TIMEOUT_S = 120.0
_KEEP_S = 24 * 3600  # cached PDFs unused this long are removed
_RUNNING: set[subprocess.Popen] = set()  # LibreOffice processes converting now (stopped when a run is cancelled)


class OfficeError(DocumentError):
    """An Office file that cannot become a PDF; the message says why."""


def office_kind(path: Path, head: bytes) -> str | None:
    """The Office type of a file (its first bytes given), or None when it is none: an OOXML zip by its
    content types, an OpenDocument zip by its mimetype, RTF and HTML by their start, an OLE file (the
    older formats, and an encrypted OOXML file) by its suffix or streams. A zip that cannot be read is
    taken at its suffix's word (it then fails as corrupt, with that reason)."""
    by_suffix = OFFICE_EXTENSIONS.get(path.suffix.lower())
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as z:
                names = set(z.namelist())
                if "mimetype" in names:
                    return _ODF.get(z.read("mimetype").decode("ascii", "replace").strip().split(";")[0])
                if "[Content_Types].xml" in names:
                    types = z.read("[Content_Types].xml").decode("utf-8", "replace")
                    return next((kind for key, kind in _OOXML if key in types), None)
        except (zipfile.BadZipFile, OSError, KeyError, ValueError, NotImplementedError):
            pass
        return by_suffix if by_suffix in _ZIPPED else None
    if head.startswith(_OLE):
        if by_suffix in _ZIPPED or by_suffix in ("doc", "xls", "ppt"):
            return by_suffix
        return next((kind for name, kind in _OLE_STREAMS if name.encode("utf-16-le") in head), None)
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf"):
        return "rtf"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html")) or (by_suffix == "html" and text.startswith(b"<")):
        return "html"
    return None


def display(kind: str) -> str:
    return kind.upper()


def soffice(kind: str = "docx") -> str:
    """LibreOffice's soffice executable; OfficeError naming the Debian package when it is not on PATH."""
    found = shutil.which("soffice") or shutil.which("libreoffice")
    if found is None:
        raise OfficeError(
            f"{display(kind)} files need LibreOffice, which is not installed (no soffice on PATH): "
            f"install the Debian package {PACKAGES.get(kind, 'libreoffice-writer')}"
        )
    return found


def check_readable(path: Path, kind: str) -> None:
    """OfficeError when the file is plainly corrupt or password-protected (before LibreOffice is started)."""
    if kind not in _ZIPPED:
        return
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(_OLE):  # an encrypted OOXML file (or an older format under a new name: LibreOffice reads it)
        if _holds(path, "EncryptedPackage".encode("utf-16-le")):
            raise OfficeError(f"password-protected {display(kind)} (encrypted): save a copy without a password")
        return
    try:
        with zipfile.ZipFile(path) as z:
            if (
                kind in ("odt", "ods", "odp")
                and "META-INF/manifest.xml" in z.namelist()
                and b"encryption-data" in z.read("META-INF/manifest.xml")
            ):
                raise OfficeError(f"password-protected {display(kind)} (encrypted): save a copy without a password")
    except zipfile.BadZipFile as e:
        raise OfficeError(f"corrupt {display(kind)}: not a readable zip archive ({e})") from None


def _holds(path: Path, needle: bytes) -> bool:
    """Whether the file's bytes hold `needle` (read in pieces: an OLE directory may sit anywhere)."""
    tail = b""
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            if needle in tail + chunk:
                return True
            tail = chunk[-len(needle) :]
    return False


# ------------------------------------------------------------------------------------ the cache
def cache_dir() -> Path:
    d = Path(tempfile.gettempdir()) / f"ocrserve-office-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    d.mkdir(mode=0o700, exist_ok=True)
    if hasattr(os, "getuid") and d.stat().st_uid != os.getuid():
        raise OfficeError(f"{d}: the cache folder of converted Office files belongs to another user")
    return d


def cache_key(path: Path) -> str:
    st = os.stat(path)
    ident = f"{Path(path).resolve()}\0{st.st_size}\0{st.st_mtime_ns}"
    return hashlib.sha256(ident.encode("utf-8", "surrogateescape")).hexdigest()[:40]


def cached_pdf(path: str | Path) -> Path | None:
    """The cached PDF of an Office file, None when there is none; OfficeError when LibreOffice failed on
    this very file before (its reason is kept beside)."""
    key, d = cache_key(Path(path)), cache_dir()
    pdf = d / f"{key}.pdf"
    if pdf.is_file():
        return pdf
    err = d / f"{key}.err"
    if err.is_file():
        raise OfficeError(err.read_text(encoding="utf-8", errors="replace").strip() or "LibreOffice failed")
    return None


def pdf_for(path: str | Path, kind: str, timeout_s: float | None = None) -> str:
    """The PDF of an Office file: the cached one, else converted now (alone); OfficeError when it cannot be."""
    path = Path(path)
    pdf = cached_pdf(path)
    if pdf is None:
        check_readable(path, kind)
        failed = convert_batch([(path, kind)], timeout_s)
        pdf = cached_pdf(path)
        if pdf is None:
            raise OfficeError(failed.get(path) or f"LibreOffice made no PDF of this {display(kind)}")
    touch(pdf)
    return str(pdf)


def prepare(paths: Iterable[str | Path], timeout_s: float | None = None) -> None:
    """Convert the Office files among `paths` that have no cached PDF yet, BATCH files per LibreOffice
    start. Nothing raises: a file that fails is found again, with its reason, when it is opened."""
    todo: list[tuple[Path, str]] = []
    for p in paths:
        p = Path(p)
        try:
            with open(p, "rb") as f:
                kind = office_kind(p, f.read(1 << 16))
            if kind is None or cached_pdf(p) is not None:
                continue
            check_readable(p, kind)
            soffice(kind)
        except (OSError, DocumentError):
            continue
        todo.append((p, kind))
    for i in range(0, len(todo), BATCH):
        try:
            convert_batch(todo[i : i + BATCH], timeout_s)
        except (OSError, DocumentError) as e:
            log.warning("LibreOffice batch: %s", e)


async def prepare_async(paths: Iterable[str | Path], timeout_s: float | None = None) -> None:
    """prepare() in a thread; cancelled, it stops the LibreOffice it started (Ctrl-C does not wait for it)."""
    import asyncio

    paths = list(paths)
    if not any(Path(p).suffix.lower() in OFFICE_EXTENSIONS or not Path(p).suffix for p in paths):
        return
    try:
        await asyncio.to_thread(prepare, paths, timeout_s)
    except asyncio.CancelledError:
        for proc in list(_RUNNING):
            _kill(proc)
        raise


def _timeout(timeout_s: float | None) -> float:
    if timeout_s is not None:
        return timeout_s
    from ocrserve.settings import get_settings

    s = get_settings()
    t = s.office_timeout_s or DEFAULT_TIMEOUT_S
    # inside a render worker the pool's own timeout must not strike first (LibreOffice would be left running)
    return min(t, 0.9 * s.render_timeout_s) if s.render_timeout_s > 0 else t


def convert_batch(items: list[tuple[Path, str]], timeout_s: float | None = None) -> dict[Path, str]:
    """One LibreOffice start converting `items` (path, type) into the cache; returns the reasons of the
    files it made no PDF of. A file LibreOffice could not load has its reason cached too (it is not tried
    again); after a timeout nothing of the batch is kept (a file is then tried alone when it is opened)."""
    failed: dict[Path, str] = {}
    if not items:
        return failed
    html = [k == "html" for _, k in items]
    if any(html) and not all(html):  # HTML is read by Writer (Writer/Web leaves headings out): its own start
        return {
            **convert_batch([it for it, h in zip(items, html, strict=True) if not h], timeout_s),
            **convert_batch([it for it, h in zip(items, html, strict=True) if h], timeout_s),
        }
    exe = soffice(items[0][1])
    per_file = _timeout(timeout_s)
    cache = cache_dir()
    _prune(cache)
    work = Path(tempfile.mkdtemp(prefix="ocrserve-lo-"))
    try:
        links, keys, stems = work / "in", {}, set()
        links.mkdir()
        for n, (path, kind) in enumerate(items):
            real, key = path.resolve(), cache_key(path)
            if kind == "html" and _suffix(path, kind) == path.suffix.lower() and real.stem not in stems:
                target = real  # in place: the images and styles it names relative to itself load
            else:  # a link named for this file: no two outputs collide, the suffix tells LibreOffice the type
                target = links / f"ocrserve-{n}-{key[:12]}{_suffix(path, kind)}"
                os.symlink(real, target)
            stems.add(target.stem)
            keys[n] = (key, kind, target)
        out = work / "out"
        cmd = [
            *offline_prefix(),
            exe,
            f"-env:UserInstallation={(work / 'profile').as_uri()}",
            "--headless",
            "--invisible",
            "--norestore",
            "--nologo",
            "--nolockcheck",
            *(["--infilter=HTML (StarWriter)"] if all(html) else []),
            "--convert-to",
            "pdf",
            "--outdir",
            str(out),
            *[str(k[2]) for k in keys.values()],
        ]
        timeout = per_file * len(items)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=work,
        )
        _RUNNING.add(proc)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.communicate()
            log.warning("LibreOffice did not finish %d file(s) within %g s", len(items), timeout)
            return {
                path: f"LibreOffice did not convert it within {timeout:g} s (OCRSERVE_OFFICE_TIMEOUT_S)"
                for path, _ in items
            }
        finally:
            _RUNNING.discard(proc)
        if proc.returncode < 0:  # stopped by a signal (a cancelled run): nothing is kept
            return {path: "LibreOffice was stopped" for path, _ in items}
        log.debug("LibreOffice converted %d file(s) in %.1f s", len(items), time.monotonic() - t0)
        said = err.decode("utf-8", "replace")
        for n, (key, kind, target) in keys.items():
            made = out / f"{target.stem}.pdf"
            if made.is_file() and made.stat().st_size > 0:
                os.replace(made, cache / f"{key}.pdf")
                continue
            why, the_file = _why(kind, said)
            failed[items[n][0]] = why
            if the_file:  # the file's own fault: kept, so it is not converted again
                _write_text(cache / f"{key}.err", why)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return failed


def _suffix(path: Path, kind: str) -> str:
    suf = path.suffix.lower()
    return suf if OFFICE_EXTENSIONS.get(suf) == kind else f".{kind}"


def _why(kind: str, said: str) -> tuple[str, bool]:
    """(why LibreOffice made no PDF, whether that is the file's fault rather than the installation's)."""
    if "no export filter" in said.lower():
        return (
            f"LibreOffice cannot convert {display(kind)} files here: install the Debian package "
            f"{PACKAGES.get(kind, 'libreoffice-writer')}"
        ), False
    return (
        f"LibreOffice could not load this {display(kind)} (corrupt, password-protected, or not a {display(kind)} file)"
    ), True


def _kill(proc: subprocess.Popen) -> None:
    """Stop LibreOffice and what it started (its own session: soffice, oosplash, soffice.bin)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _prune(cache: Path) -> None:
    """Remove cached PDFs and reasons not used for a day (a cache hit in open_source touches its file)."""
    cutoff = time.time() - _KEEP_S
    for f in cache.iterdir():
        try:
            if f.stat().st_mtime < cutoff:
                f.unlink()
        except OSError:
            pass


def touch(pdf: str | Path) -> None:
    try:
        os.utime(pdf)
    except OSError:
        pass

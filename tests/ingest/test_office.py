"""Office inputs: DOCX, XLSX, PPTX, ODT, RTF and HTML become PDFs through LibreOffice (Debian's package, as CI
installs it) and then go the normal way; the JSON keeps the original type. A corrupt or encrypted file fails
alone with its reason, and a missing LibreOffice is one line naming the package."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ocrserve.ingest import office
from ocrserve.ingest.sniff import sniff_file
from tests.cli.support import cli
from tests.support import office as make
from tests.support.helpers import pid_gone, text_pdf
from tests.support.office import SOFFICE


@pytest.fixture
def lo():
    assert SOFFICE, (
        "LibreOffice is not installed: apt-get install -y libreoffice-writer libreoffice-calc libreoffice-impress"
    )
    return SOFFICE


def test_sniff_tells_office_types_by_content(tmp_path):
    assert sniff_file(make.docx(tmp_path / "a.docx")) == "docx"
    assert sniff_file(make.xlsx(tmp_path / "b.xlsx")) == "xlsx"
    assert sniff_file(make.pptx(tmp_path / "c.pptx")) == "pptx"
    assert sniff_file(make.odt(tmp_path / "d.odt")) == "odt"
    assert sniff_file(make.rtf(tmp_path / "e.rtf")) == "rtf"
    assert sniff_file(make.html(tmp_path / "f.html")) == "html"
    # by content, whatever the name says
    assert sniff_file(make.docx(tmp_path / "noext")) == "docx"
    assert sniff_file(make.xlsx(tmp_path / "wrong.docx")) == "xlsx"
    # a zip that is no Office file is no document; a broken one under an Office name is that type (and fails)
    with __import__("zipfile").ZipFile(tmp_path / "x.zip", "w") as z:
        z.writestr("a.txt", "hello")
    assert sniff_file(tmp_path / "x.zip") is None
    assert sniff_file(make.corrupt_docx(tmp_path / "bad.docx")) == "docx"
    assert sniff_file(make.encrypted_docx(tmp_path / "locked.docx")) == "docx"


def test_corrupt_and_encrypted_fail_with_their_reason_before_libreoffice(tmp_path):
    with pytest.raises(office.OfficeError, match="corrupt DOCX: not a readable zip archive"):
        office.check_readable(make.corrupt_docx(tmp_path / "bad.docx"), "docx")
    with pytest.raises(office.OfficeError, match=r"password-protected DOCX \(encrypted\)"):
        office.check_readable(make.encrypted_docx(tmp_path / "locked.docx"), "docx")
    office.check_readable(make.docx(tmp_path / "ok.docx"), "docx")


@pytest.mark.slow
def test_convert_a_folder_of_office_files_and_pdfs(lo, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    text_pdf(src / "report.pdf", pages=1, title="Report")
    make.docx(src / "contract.docx")
    make.xlsx(src / "prices.xlsx")
    make.pptx(src / "slides.pptx")
    make.odt(src / "memo.odt")
    make.rtf(src / "letter.rtf")
    make.html(src / "page.html")
    make.corrupt_docx(src / "broken.docx")
    out = tmp_path / "out"
    r = cli("convert", str(src), "-o", str(out), "--format", "md,json,pdf")
    assert r.returncode == 1, r.stdout + r.stderr  # one document failed, alone
    assert "broken.docx: corrupt DOCX: not a readable zip archive" in r.stderr
    expect = {
        "report": ("pdf", "Report page 1"),
        "contract": ("docx", "Contract Alpha"),
        "prices": ("xlsx", "Widget"),
        "slides": ("pptx", "Quarterly Review"),
        "memo": ("odt", "OpenDocument memo"),
        "letter": ("rtf", "rich text letter"),
        "page": ("html", "Hello HTML"),
    }
    for name, (kind, text) in expect.items():
        md = (out / name / f"{name}.md").read_text(encoding="utf-8")
        assert text in md, (name, md)
        doc = json.loads((out / name / f"{name}.json").read_text(encoding="utf-8"))
        assert doc["source"]["type"] == kind and doc["source"]["path"].endswith(f"{name}.{kind}")
        assert doc["pages"] and all(p["status"] == "ok" for p in doc["pages"])
        assert (out / name / f"{name}.pdf").read_bytes().startswith(b"%PDF-")  # the searchable PDF, from its pages
    assert doc["pages"][0]["unit"] == "pt"  # pages of the PDF LibreOffice made
    assert not (out / "broken").exists()
    # the lite engine read the converted PDF's text layer (no OCR of the rendered image)
    contract = json.loads((out / "contract" / "contract.json").read_text(encoding="utf-8"))
    assert "The tenant pays the rent monthly." in json.dumps(contract)


def test_missing_libreoffice_is_one_line_naming_the_package(tmp_path, monkeypatch):
    src = tmp_path / "in"
    src.mkdir()
    make.docx(src / "contract.docx")
    make.xlsx(src / "prices.xlsx")
    text_pdf(src / "report.pdf", pages=1)
    bare = tmp_path / "bin"
    bare.mkdir()
    os.symlink(sys.executable, bare / "python")
    monkeypatch.setenv("PATH", str(bare))  # a Python, and no soffice
    r = cli("convert", str(src), "-o", str(tmp_path / "out"))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "contract.docx:" in ln and "failed" not in ln]
    assert lines == [
        f"  {src / 'contract.docx'}: DOCX files need LibreOffice, which is not installed "
        "(no soffice on PATH): install the Debian package libreoffice-writer"
    ], r.stderr
    assert "prices.xlsx: XLSX files need LibreOffice" in r.stderr and "libreoffice-calc" in r.stderr
    assert (tmp_path / "out" / "report" / "report.md").is_file()  # the PDF is converted all the same


def test_a_libreoffice_that_hangs_is_stopped_at_the_timeout(tmp_path, monkeypatch):
    """The whole process group goes (soffice starts children), and the file fails with the timeout named."""
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "soffice"
    fake.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {tmp_path / 'child.pid'}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    doc = make.docx(tmp_path / "slow.docx")
    t0 = time.monotonic()
    failed = office.convert_batch([(doc, "docx")], timeout_s=1)
    assert time.monotonic() - t0 < 15
    assert failed == {doc: "LibreOffice did not convert it within 1 s (OCRSERVE_OFFICE_TIMEOUT_S)"}
    assert office.cached_pdf(doc) is None  # nothing kept: the file is tried again when it is opened
    child = int((tmp_path / "child.pid").read_text())
    # the grandchild (soffice.bin's place) was killed with its group
    assert pid_gone(child, 5), "the child of the hanging soffice is still running"

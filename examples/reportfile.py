"""The example report in each format, as a file of that format (standard library only): a
one-page PDF, CSV, JSON or plain text, each listing the report's fields."""

from __future__ import annotations

import csv
import io
import json
from typing import Any


def render(fmt: str, fields: dict[str, Any]) -> bytes:
    """The report file's bytes in ``fmt`` (pdf, csv, json or txt)."""
    if fmt == "json":
        return (json.dumps(fields, indent=2) + "\n").encode()
    rows = [
        (k, v if isinstance(v, (str, int, float)) else json.dumps(v)) for k, v in fields.items()
    ]
    if fmt == "csv":
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([("field", "value"), *rows])
        return out.getvalue().encode()
    lines = [f"{k}: {v}" for k, v in rows]
    if fmt == "pdf":
        return pdf(["Report", "", *lines])
    return ("\n".join(lines) + "\n").encode()


def pdf(lines: list[str]) -> bytes:
    """A minimal valid PDF 1.4: one US Letter page showing ``lines`` in Helvetica (text outside
    Latin-1 shows as '?'), with the cross-reference table readers use to find its objects."""
    text = " T* ".join(f"({_pdf_text(line)}) Tj" for line in lines)
    stream = f"BT /F1 12 Tf 72 720 Td 16 TL {text} ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)  # each entry exactly 20 bytes
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _pdf_text(s: str) -> str:
    s = s.encode("latin-1", "replace").decode("latin-1")
    return (
        s.replace("\\", "\\\\")
        .replace("(", "\\(")
        .replace(")", "\\)")
        .replace("\r", " ")
        .replace("\n", " ")
    )

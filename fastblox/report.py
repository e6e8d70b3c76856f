"""``write_report(results_dir)``: one self-contained HTML page of a results folder (a sweep or an
experiment): its summary table(s) and every PNG figure in it, embedded as base64 (no external files).

The table is ``summary.parquet`` of the folder when there is one, else every ``summary*.parquet``
found below it (one table each). Parameter columns that hold the same value in every row are
listed once above the table instead of repeated in it.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

from .sweep.config import PARAM_KEYS

#: the sweep parameter columns (derived from fastblox.RunSpec through the sweep config)
PARAM_COLS = ("point_id",) + PARAM_KEYS
HOUR_COLS_SUFFIX = "_s"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.6em} h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3} td.s{text-align:left}
figure{display:inline-block;margin:.5em;vertical-align:top} figure img{max-width:560px;border:1px solid #eee}
figcaption{font-size:.85em;color:#555;text-align:center} .const{font-size:.85em;color:#444}
"""


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _table_html(df) -> str:
    rows = df.to_dicts()
    const = {}
    cols = []
    for c in df.columns:
        vals = df[c].to_list()
        if c in PARAM_COLS and c != "point_id" and len(rows) > 1 and all(v == vals[0] for v in vals):
            const[c] = vals[0]
        elif c in PARAM_COLS and all(v is None or v == "" for v in vals):
            continue
        else:
            cols.append(c)
    out = []
    if const:
        items = ", ".join(f"<b>{html.escape(k)}</b> = {html.escape(_fmt(v))}" for k, v in const.items()
                          if v not in (None, ""))
        out.append(f'<p class="const">Same in every row: {items}</p>')
    out.append("<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr></thead><tbody>")
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            cls = ' class="s"' if isinstance(v, str) else ""
            text = _fmt(v)
            if c.endswith("_s") and isinstance(v, (int, float)) and v == v and abs(v) >= 3600:
                text += f" ({v / 3600:.1f} h)"
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _summaries(root: Path) -> list[Path]:
    top = root / "summary.parquet"
    if top.exists():
        return [top]
    return sorted(p for p in root.rglob("summary*.parquet") if not p.name.startswith("."))


def write_report(results_dir, out=None, title: str | None = None) -> Path:
    """Write ``<results_dir>/report.html`` (or ``out``) and return its path."""
    import polars as pl

    from .errors import ConfigError

    root = Path(results_dir)
    if not root.is_dir():
        raise ConfigError(f"report: {str(root)!r} is not a folder")
    meta = {}
    if (root / "experiment.json").exists():
        meta = _read(root / "experiment.json", lambda p: json.loads(p.read_text()))
    title = title or (f"fastblox experiment {meta['experiment']}" if meta else f"fastblox results: {root.name}")
    parts = [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>"]
    if meta:
        q = " (quick)" if meta.get("quick") else ""
        parts.append(f"<p>{html.escape(meta.get('description', ''))}{q}</p>")
    sums = _summaries(root)
    parts.append("<h2>Summary</h2>")
    if not sums:
        parts.append("<p>No summary*.parquet found.</p>")
    for p in sums:
        df = _read(p, pl.read_parquet)
        sort = [c for c in ("cluster", "policy", "admission", "load") if c in df.columns]
        if sort:
            df = df.sort(sort)
        if len(sums) > 1 or p.parent != root:
            parts.append(f"<h3>{html.escape(str(p.relative_to(root)))}</h3>")
        parts.append(f"<p>{df.height} rows; times in seconds (hours in brackets).</p>")
        parts.append(_table_html(df))
    pngs = sorted(p for p in root.rglob("*.png") if "points" not in p.relative_to(root).parts)
    parts.append("<h2>Figures</h2>")
    if not pngs:
        parts.append("<p>No PNG figures found.</p>")
    for p in pngs:
        b64 = base64.b64encode(p.read_bytes()).decode("ascii")
        cap = html.escape(str(p.relative_to(root)))
        parts.append(f'<figure><img src="data:image/png;base64,{b64}" alt="{cap}"><figcaption>{cap}</figcaption></figure>')
    parts.append("</body></html>\n")
    dest = Path(out) if out is not None else root / "report.html"
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text("\n".join(parts), encoding="utf-8")
    tmp.replace(dest)
    return dest


def _read(path: Path, read):
    """``read(path)``, or a :class:`ConfigError` naming the file when it is damaged or unreadable."""
    from .errors import ConfigError

    try:
        return read(path)
    except Exception as e:  # noqa: BLE001 - polars, pyarrow, json and OS errors alike: one line
        raise ConfigError(f"report: cannot read {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None

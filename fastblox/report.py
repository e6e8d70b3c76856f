"""``write_report(results_dir)``: one self-contained HTML page of a results folder (a sweep or an
experiment): its summary table(s) and every PNG figure in it, embedded as base64 (no external files).

The table is ``summary.parquet`` of the folder when there is one, else every ``summary*.parquet``
found below it (one table each); a run folder's ``summary.json`` gives a one-row table. Columns
that hold the same value in every row are listed once above the table instead of repeated in it,
and columns empty in every row are left out (and named). Each figure's caption is the one stored
in its PNG (:func:`fastblox.plots.caption_of`). A run or sweep folder without figures gets its
standard ones drawn first (:func:`fastblox.folder_plots.plot_folders`).
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

from .errors import ConfigError


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.6em} h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3} td{white-space:nowrap} td.s{text-align:left} .wide{overflow-x:auto;max-width:100%}
figure{display:inline-block;margin:.5em;vertical-align:top} figure img{max-width:560px;border:1px solid #eee}
figure{max-width:560px} figcaption{font-size:.85em;color:#444;text-align:left}
figcaption .file{color:#999;font-size:.9em} .const{font-size:.85em;color:#444}
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


def _empty(v) -> bool:
    return v is None or v == "" or (isinstance(v, float) and math.isnan(v))


def split_columns(df) -> tuple[list[str], dict, list[str]]:
    """``(shown, constant, empty)``: the columns whose values differ between rows (``point_id``
    always), those with one value in every row (``{column: value}``; with one row, none), and
    those empty in every row (null, NaN or ``""``)."""
    shown, const, empty = [], {}, []
    for c in df.columns:
        vals = df[c].to_list()
        if all(_empty(v) for v in vals):
            empty.append(c)
        elif c != "point_id" and len(vals) > 1 and all(v == vals[0] for v in vals):
            const[c] = vals[0]
        else:
            shown.append(c)
    return shown, const, empty


def _table_html(df) -> str:
    rows = df.to_dicts()
    cols, const, empty = split_columns(df)
    out = []
    if const:
        items = ", ".join(f"<b>{html.escape(k)}</b> = {html.escape(_fmt(v))}" for k, v in const.items())
        out.append(f'<p class="const">Same in every row: {items}</p>')
    if empty:
        out.append(f'<p class="const">Empty in every row (not shown): {html.escape(", ".join(empty))}</p>')
    out.append('<div class="wide"><table><thead><tr>' + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr></thead><tbody>")
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
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _run_table(root: Path):
    """A run folder's ``summary.json`` (configuration and summary) as a one-row table."""
    import polars as pl

    doc = _read(root / "summary.json", lambda p: json.loads(p.read_text()))
    row = {k: v for k, v in {**doc.get("config", {}), **doc.get("summary", {})}.items()
           if not isinstance(v, (dict, list))}
    return pl.DataFrame([row], infer_schema_length=None)


def _caption(png: Path, root: Path) -> str:
    """The caption stored in the figure (:func:`fastblox.plots.caption_of`), else its file name."""
    from .plots import caption_of

    return caption_of(png) or png.stem.replace("_", " ")


def _summaries(root: Path) -> list[Path]:
    top = root / "summary.parquet"
    if top.exists():
        return [top]
    return sorted(p for p in root.rglob("summary*.parquet") if not p.name.startswith("."))


def _pngs(root: Path) -> list[Path]:
    """The folder's figures (not those under ``points/``): summaries against a parameter first,
    then distributions, then the rest; by path within each."""
    def rank(p: Path) -> tuple:
        n = p.stem
        return (0 if "_vs_" in n or "_by_" in n else 1 if "cdf" in n else 2, str(p.relative_to(root)))

    return sorted((p for p in root.rglob("*.png") if "points" not in p.relative_to(root).parts), key=rank)


def _draw(root: Path) -> list[Path]:
    """A run or sweep folder without figures: draw its standard ones (``fastblox plot``); other
    folders: none."""
    from .folder_plots import default_out, folder_kind, plot_folders

    try:
        folder_kind(root)
    except ConfigError:
        return []
    plot_folders([root], out=default_out(root))
    return _pngs(root)


def write_report(results_dir, out=None, title: str | None = None, plot: bool = True) -> Path:
    """Write ``<results_dir>/report.html`` (or ``out``) and return its path. A run or sweep
    folder without PNG figures gets its standard figures drawn first (``plot=False``: not)."""
    import polars as pl

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
    is_run = not sums and (root / "summary.json").is_file()
    if is_run:
        parts.append(_table_html(_run_table(root)))
    elif not sums:
        parts.append("<p>No summary*.parquet found.</p>")
    for p in sums:
        df = _read(p, pl.read_parquet)
        sort = [c for c in ("cluster", "policy", "admission", "load", "seed") if c in df.columns]
        if sort:
            df = df.sort(sort)
        if len(sums) > 1 or p.parent != root:
            parts.append(f"<h3>{html.escape(str(p.relative_to(root)))}</h3>")
        parts.append(f"<p>{df.height} rows; times in seconds (hours in brackets).</p>")
        parts.append(_table_html(df))
    pngs = _pngs(root)
    if not pngs and plot:
        pngs = _draw(root)
    parts.append("<h2>Figures</h2>")
    if not pngs:
        parts.append("<p>No PNG figures found.</p>")
    for p in pngs:
        b64 = base64.b64encode(p.read_bytes()).decode("ascii")
        rel = html.escape(str(p.relative_to(root)))
        cap = html.escape(_caption(p, root))
        parts.append(f'<figure><img src="data:image/png;base64,{b64}" alt="{cap}">'
                     f'<figcaption>{cap} <span class="file">{rel}</span></figcaption></figure>')
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

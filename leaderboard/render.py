"""The board: ``leaderboard/README.md`` (Markdown tables) and ``leaderboard/site/index.html``
(a single self-contained page: tables sortable by any metric, and per track a predicted-vs-
measured scatter and an error CDF per entry, drawn as SVG by a few lines of inline script; no
network access, it opens from the file system).

Input: the result files ``<results>/<track>/<entry>.json`` written by
:func:`leaderboard.run.evaluate_entry`, ``<results>/status.json`` (every track, with the
reason a track without data is skipped) and ``<results>/noise_floor.json``. Beside each track's
entries the board shows reference rows (the noise floor, published results marked as published
with their source and protocol difference) and the per-scenario views of
:mod:`leaderboard.views` (HELP's per-device Table 3 layout; the USC phones' matrix of phone x
core set x precision and its aggregates). On tracks of repeated draws a figure is the mean over
the seeds, ± their standard deviation. Submissions are marked as such.

Everything shown may come from a submitter (names, descriptions, rejection messages quoting
their files): the page embeds its data as JSON with ``<``, ``>`` and ``&`` escaped (``\u003c``),
so no text can end the script element, and the README escapes Markdown and HTML in such text.
"""
from __future__ import annotations

import html
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from .metrics import METRICS

HERE = Path(__file__).resolve().parent


def _result_ok(doc: Any) -> bool:
    return (isinstance(doc, dict) and isinstance(doc.get("track"), str) and isinstance(doc.get("entry"), str)
            and isinstance(doc.get("meta"), dict) and isinstance(doc.get("result"), dict)
            and isinstance(doc["result"].get("aggregate"), dict) and isinstance(doc.get("plot"), dict))


def load_results(results_dir: str | Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    from generators.safeload import LoadError, load_json

    root = Path(results_dir)
    status_file = root / "status.json"
    status = load_json(status_file) if status_file.is_file() else {}
    rej = root / "rejected.json"
    rejected = load_json(rej) if rej.is_file() else {}
    if isinstance(rejected, dict) and rejected:
        status["__rejected__"] = rejected
    by_track: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(root.glob("*/*.json")):
        try:
            doc = load_json(p)
        except LoadError as e:
            print(f"leaderboard: render: {e}; left off the board", file=sys.stderr)
            continue
        if not _result_ok(doc):
            print(f"leaderboard: render: {p}: not a result file (entry, track, meta, result, plot); left off the board",
                  file=sys.stderr)
            continue
        by_track.setdefault(doc["track"], []).append(doc)
    for name in by_track:
        status.setdefault(name, {"title": name, "available": True, "metrics": list(by_track[name][0]["result"]["aggregate"]),
                                 "primary": next(iter(by_track[name][0]["result"]["aggregate"]))})
    floors_file = root / "noise_floor.json"
    floors = load_json(floors_file) if floors_file.is_file() else {}
    for name, st in status.items():  # in memory only: the views read it from the track's status
        if name != "__rejected__" and isinstance(st, dict) and isinstance(floors, dict) and isinstance(floors.get(name), dict):
            st["noise_floor"] = floors[name]
    return status, by_track


def _context(name: str, status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]]) -> Any:
    from .views import Context, scenario_attributes

    st = status[name]
    entries = ranked(by_track.get(name, []), st["primary"])
    return Context(name, st, entries, st.get("noise_floor"), scenario_attributes(entries))


def _spread(doc: dict[str, Any], metric: str) -> float | None:
    seeds = doc["result"].get("seeds") or {}
    v = (seeds.get("aggregate_std") or {}).get(metric)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def ranked(entries: list[dict[str, Any]], primary: str) -> list[dict[str, Any]]:
    m = METRICS.get(primary)

    def key(doc: dict[str, Any]) -> float:
        v = doc["result"]["aggregate"].get(primary)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return math.inf
        return -v if m.higher_is_better else v

    return sorted(entries, key=lambda d: (key(d), d["entry"]))


def fmt(metric: str, v: Any, sd: Any = None) -> str:
    """A figure as the board prints it; with ``sd`` (spread over seeds) as "mean ± sd"."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    unit = METRICS.get(metric).unit
    if unit == "fraction":
        out = f"{100 * v:.1f}%"
        spread = f"{100 * sd:.1f}" if sd is not None else None
    elif unit == "%":
        out, spread = f"{v:.2f}", (f"{sd:.2f}" if sd is not None else None)
    elif unit == "ms":
        out, spread = f"{v:.3g}", (f"{sd:.2g}" if sd is not None else None)
    else:
        out, spread = f"{v:.3f}", (f"{sd:.3f}" if sd is not None else None)
    return f"{out} ± {spread}" if spread is not None else out


# ---------------------------------------------------------------- README
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|])")  # code, emphasis, links/images, table cells


def md_text(text: Any, limit: int = 300) -> str:
    """Text from an entry as inert Markdown on one line: HTML escaped, Markdown syntax
    backslash-escaped, line breaks folded, length bounded."""
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[: limit - 3] + "..."
    return _MD_SPECIAL.sub(r"\\\1", html.escape(s, quote=False))


def _not_entered(st: dict[str, Any]) -> list[tuple[str, str]]:
    """(predictor, why) for the registered predictors without a result on the track."""
    absent = st.get("not_entered")
    return sorted((str(k), str(v)) for k, v in absent.items()) if isinstance(absent, dict) else []


def render_markdown(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["# latbench leaderboard", "",
             "Generated by `leaderboard render` from `leaderboard/results/` (do not edit by hand). "
             "Entries are sorted by each track's primary metric (marked *); metrics are the unweighted "
             "mean over the track's scenarios; on tracks of repeated draws, the mean over seeds ± their standard "
             "deviation. Under each track: reference rows (the noise floor, one measurement against another; "
             "published results, marked *published*, with their source and how their protocol differs) and "
             "per-scenario views (per device as HELP's Table 3; per phone × core set × precision as the USC "
             "study's Fig. 21, and aggregates). Submissions are marked *submission*. The site "
             "`leaderboard/site/index.html` has the same tables, sortable, with plots. How tracks, splits and "
             "submissions work: [docs/leaderboard.md](../docs/leaderboard.md).", ""]
    avail = [n for n in sorted(status) if n != "__rejected__" and status[n].get("available")]
    missing = [n for n in sorted(status) if n != "__rejected__" and not status[n].get("available")]
    for name in avail:
        st = status[name]
        metrics = st["metrics"]
        lines += [f"## {name}: {st.get('title', '')}", ""]
        if st.get("description"):
            lines += [st["description"], ""]
        lines += [f"{st.get('scenarios', '?')} scenario(s), {st.get('networks', '?')} networks, "
                  f"{st.get('folds', '?')} fold(s); source: {st.get('reference', '')}", ""]
        entries = ranked(by_track.get(name, []), st["primary"])
        absent = _not_entered(st)
        if not entries:
            lines += ["No entries yet.", ""] + [f"- not on this track: {md_text(p, 40)}: {md_text(w)}" for p, w in absent]
            lines += [""] if absent else []
            continue
        head = ["#", "entry", "kind"] + [METRICS.get(m).label + (" *" if m == st["primary"] else "") for m in metrics]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i, d in enumerate(entries, 1):
            agg = d["result"]["aggregate"]
            row = [str(i), md_text(d["entry"]), md_text(d["meta"].get("kind", "submission"))] + [
                fmt(m, agg.get(m), _spread(d, m)) for m in metrics]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        if any(d["result"].get("seeds") for d in entries):
            folds = max(len((d["result"].get("seeds") or {}).get("folds", [])) for d in entries)
            lines += [f"Repeated draws: each figure is the mean over the {folds} seeds of the split ± their standard "
                      "deviation (each seed scored on its own).", ""]
        ctx = _context(name, status, by_track)
        lines += _md_reference(ctx, metrics) + _md_views(ctx)
        if absent:
            lines += ["Registered predictors not on this track:", ""]
            lines += [f"- {md_text(p, 40)}: {md_text(w)}" for p, w in absent] + [""]
    rejected = status.get("__rejected__", {})
    if rejected:
        lines += ["## Rejected entries", "", "Entries whose predictions did not validate (first problem shown):", ""]
        lines += [f"- {md_text(name, 80)}: {md_text(probs[0] if isinstance(probs, list) and probs else probs)}"
                  for name, probs in sorted(rejected.items())] + [""]
    if missing:
        lines += ["## Tracks waiting for data", "", "| track | title | why it is skipped |", "|---|---|---|"]
        for name in missing:
            lines.append(f"| {name} | {status[name].get('title', '')} | {status[name].get('reason', '')} |")
        lines.append("")
    return "\n".join(lines)


def _md_reference(ctx: Any, metrics: list[str]) -> list[str]:
    from .views import reference_rows

    rows = reference_rows(ctx)
    head = ["reference", "kind"] + [METRICS.get(m).label for m in metrics] + ["source, protocol"]
    out = ["Reference rows (not entries): the noise floor (one measurement of a network against another: "
           "no predictor can honestly do better) and published results.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [fmt(m, r["aggregate"].get(m)) if m in r["aggregate"] else "" for m in metrics]
        out.append("| " + " | ".join([md_text(r["label"]), r["kind"]] + cells + [md_text(r["note"], 900)]) + " |")
    return out + [""]


def _md_table(view: dict[str, Any]) -> list[str]:
    m = view["metric"]
    out = [f"### {view['title']}", "", view["caption"], ""]
    if "layers" in view:
        layers = [view["layers"][0]] + [layer for layer in view["layers"][1:] if layer["kind"] == "floor"]
        for layer in layers:
            out += [f"{md_text(layer['label'])} ({layer['kind']}):", ""]
            out += ["| | " + " | ".join(md_text(c) for c in view["columns"]) + " |", "|" + "---|" * (len(view["columns"]) + 1)]
            for label, cells in zip(view["row_labels"], layer["cells"]):
                out.append(f"| {md_text(label)} | " + " | ".join(fmt(m, v) for v in cells) + " |")
            out.append("")
        return out
    out += ["| | kind | " + " | ".join(md_text(c) for c in view["columns"]) + " |", "|" + "---|" * (len(view["columns"]) + 2)]
    for r in view["rows"]:
        cells = [fmt(m, v, sd) for v, sd in zip(r["cells"], r["spread"])]
        out.append(f"| {md_text(r['label'])} | {r['kind']} | " + " | ".join(cells) + " |")
    notes = [r for r in view["rows"] if r["kind"] == "floor" and r.get("note")]  # published: in the reference rows
    if notes:
        out += [""] + [f"- {md_text(r['label'])}: {md_text(r['note'], 600)}" for r in notes]
    return out + [""]


def _md_views(ctx: Any) -> list[str]:
    from .views import views_for

    return [line for view in views_for(ctx) for line in _md_table(view)]


# ---------------------------------------------------------------- site
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{padding:.25em .6em;border-bottom:1px solid #e3e3e3;text-align:right}
th:nth-child(-n+3),td:nth-child(-n+3){text-align:left}
th.sortable{cursor:pointer;user-select:none}th.sortable:hover{background:#f0f0f0}
th.sorted-asc::after{content:" \\25B2"}th.sorted-desc::after{content:" \\25BC"}
.plots{display:flex;gap:1em;flex-wrap:wrap}.plot{border:1px solid #ddd}
.legend span{display:inline-block;margin-right:1em;font-size:.85em}
.legend i{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:middle}
.missing{color:#777}.desc{color:#444;font-size:.92em}
tr.published td{background:#f4f8ff}tr.floor td{background:#f6f6f0;font-style:italic}
tr.submission td:nth-child(-n+3){background:#fff6e8}.badge{font-size:.75em;padding:0 .35em;border-radius:.3em;background:#e8a33d;color:#fff}
.pub-badge{font-size:.75em;padding:0 .35em;border-radius:.3em;background:#3d6fe8;color:#fff}
.note{color:#555;font-size:.82em;text-align:left!important;max-width:40em}
h3{font-size:1.05em;margin:1.2em 0 .3em}.caption{color:#444;font-size:.88em;margin:.2em 0}
"""

_JS = r"""
const DATA = JSON.parse(document.getElementById('board-data').textContent);
const COLORS = ['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b','#e377c2','#17becf','#bcbd22','#7f7f7f'];
const NS = 'http://www.w3.org/2000/svg';
function esc(s){return String(s===undefined||s===null?'':s).replace(/[&<>"']/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));}
function el(tag, attrs, parent){const e=document.createElementNS(NS,tag);for(const k in attrs)e.setAttribute(k,attrs[k]);if(parent)parent.appendChild(e);return e;}
function fmt(m, v, sd){
  if (v===null||v===undefined||Number.isNaN(v)) return '–';
  const u = DATA.metrics[m].unit; let a, b=null; const has = sd!==null&&sd!==undefined&&!Number.isNaN(sd);
  if (u==='fraction'){a=(100*v).toFixed(1)+'%'; if(has) b=(100*sd).toFixed(1);}
  else if (u==='%'){a=v.toFixed(2); if(has) b=sd.toFixed(2);}
  else if (u==='ms'){a=v.toPrecision(3); if(has) b=sd.toPrecision(2);}
  else {a=v.toFixed(3); if(has) b=sd.toFixed(3);}
  return b===null ? a : a+' ± '+b;
}
function kindCell(td, kind){
  td.textContent=kind;
  if(kind==='submission'){td.insertAdjacentHTML('beforeend',' <span class="badge">submitted</span>');}
  if(kind==='published'){td.textContent=''; td.insertAdjacentHTML('beforeend','<span class="pub-badge">published</span>');}
  if(kind==='floor'){td.textContent='noise floor';}
}
function viewTable(v){
  const wrap=document.createElement('div'); wrap.className='view'; wrap.dataset.view=v.id;
  wrap.innerHTML=`<h3>${esc(v.title)}</h3><p class="caption">${esc(v.caption)}</p>`;
  const t=document.createElement('table'); t.className='view-table'; t.dataset.view=v.id;
  if(v.layers){
    const sel=document.createElement('select'); sel.className='layer-select';
    v.layers.forEach((l,i)=>{const o=document.createElement('option'); o.value=i; o.textContent=l.label+' ('+l.kind+')'; sel.appendChild(o);});
    const draw=()=>{const l=v.layers[+sel.value]; t.dataset.layer=l.label;
      t.innerHTML='<thead><tr><th></th>'+v.columns.map(c=>`<th>${esc(c)}</th>`).join('')+'</tr></thead><tbody></tbody>';
      v.row_labels.forEach((r,i)=>{const tr=t.tBodies[0].insertRow(); tr.className=l.kind; tr.insertCell().textContent=r;
        l.cells[i].forEach(x=>{const td=tr.insertCell(); td.dataset.value=(x===null)?'NaN':x; td.textContent=fmt(v.metric,x);});});};
    sel.addEventListener('change',draw); wrap.appendChild(sel); draw();
  } else {
    t.innerHTML='<thead><tr><th></th><th>kind</th>'+v.columns.map(c=>`<th>${esc(c)}</th>`).join('')+'</tr></thead><tbody></tbody>';
    v.rows.forEach(r=>{const tr=t.tBodies[0].insertRow(); tr.className=r.kind; tr.dataset.label=r.label;
      const c=tr.insertCell(); c.textContent=r.label; c.title=r.note||''; kindCell(tr.insertCell(), r.kind);
      r.cells.forEach((x,i)=>{const td=tr.insertCell(); td.dataset.value=(x===null)?'NaN':x; td.textContent=fmt(v.metric,x,r.spread[i]);});});
  }
  wrap.appendChild(t); return wrap;
}
function referenceTable(t){
  const tab=document.createElement('table'); tab.className='reference'; tab.dataset.track=t.name;
  tab.innerHTML='<thead><tr><th>reference</th><th>kind</th>'+t.metrics.map(m=>`<th>${DATA.metrics[m].label}</th>`).join('')+'<th>source, protocol</th></tr></thead><tbody></tbody>';
  t.reference.forEach(r=>{const tr=tab.tBodies[0].insertRow(); tr.className=r.kind; tr.dataset.label=r.label;
    tr.insertCell().textContent=r.label; kindCell(tr.insertCell(), r.kind);
    t.metrics.forEach(m=>{const td=tr.insertCell(); const v=(m in r.aggregate)?r.aggregate[m]:undefined; td.textContent=(v===undefined)?'':fmt(m,v);});
    const n=tr.insertCell(); n.className='note'; n.textContent=r.note;});
  return tab;
}
function axes(svg, W, H, P, x0, x1, y0, y1, xl, yl, log){
  el('rect',{x:P,y:10,width:W-P-10,height:H-P-10,fill:'none',stroke:'#999'},svg);
  const t1=el('text',{x:(W+P)/2,y:H-8,'text-anchor':'middle','font-size':11},svg);t1.textContent=xl;
  const t2=el('text',{x:12,y:(H-P)/2,'font-size':11,transform:`rotate(-90 12 ${(H-P)/2})`,'text-anchor':'middle'},svg);t2.textContent=yl;
  const lab=(v)=>log?(Math.pow(10,v)).toPrecision(2):v.toFixed(0);
  [[x0,P,H-P+14],[x1,W-10,H-P+14]].forEach(([v,x,y])=>{const t=el('text',{x:x,y:y,'font-size':10,'text-anchor':'middle'},svg);t.textContent=lab(v);});
  [[y0,H-P],[y1,16]].forEach(([v,y])=>{const t=el('text',{x:P-3,y:y,'font-size':10,'text-anchor':'end'},svg);t.textContent=lab(v);});
}
function scatter(div, entries){
  const W=360,H=320,P=44; const svg=el('svg',{width:W,height:H,class:'plot scatter'},null);
  let lo=Infinity,hi=-Infinity;
  entries.forEach(d=>{d.plot.measured.concat(d.plot.predicted).forEach(v=>{if(v>0){lo=Math.min(lo,Math.log10(v));hi=Math.max(hi,Math.log10(v));}})});
  if(!isFinite(lo)){lo=0;hi=1;} if(hi-lo<1e-9){hi=lo+1;}
  const sx=v=>P+(Math.log10(v)-lo)/(hi-lo)*(W-P-10), sy=v=>H-P-(Math.log10(v)-lo)/(hi-lo)*(H-P-20);
  axes(svg,W,H,P,lo,hi,lo,hi,'measured ms','predicted ms',true);
  el('line',{x1:sx(Math.pow(10,lo)),y1:sy(Math.pow(10,lo)),x2:sx(Math.pow(10,hi)),y2:sy(Math.pow(10,hi)),stroke:'#aaa','stroke-dasharray':'4 3'},svg);
  entries.forEach((d,i)=>{const g=el('g',{'data-entry':d.entry},svg);
    d.plot.measured.forEach((m,j)=>{el('circle',{cx:sx(m).toFixed(1),cy:sy(d.plot.predicted[j]).toFixed(1),r:1.8,fill:COLORS[i%COLORS.length],'fill-opacity':0.45},g);});});
  div.appendChild(svg);
}
function cdf(div, entries){
  const W=360,H=320,P=44; const svg=el('svg',{width:W,height:H,class:'plot cdf'},null);
  let hi=1; entries.forEach(d=>{const q=d.plot.abs_pct_error_quantiles; hi=Math.max(hi, q[Math.floor(q.length*0.95)]||1);});
  hi=Math.min(Math.max(hi,10),200);
  const sx=v=>P+Math.min(v,hi)/hi*(W-P-10), sy=f=>H-P-f*(H-P-20);
  axes(svg,W,H,P,0,hi,0,100,'|error| %','networks %',false);
  entries.forEach((d,i)=>{const q=d.plot.abs_pct_error_quantiles; let path='';
    q.forEach((v,j)=>{path+=(j?'L':'M')+sx(v).toFixed(1)+','+sy(j/(q.length-1)).toFixed(1);});
    el('path',{d:path,fill:'none',stroke:COLORS[i%COLORS.length],'stroke-width':1.8,class:'cdf-line','data-entry':d.entry},svg);});
  div.appendChild(svg);
}
function sortTable(table, col, metric){
  const th = table.querySelectorAll('th')[col];
  const higher = DATA.metrics[metric] ? DATA.metrics[metric].higher_is_better : false;
  let dir = th.classList.contains('sorted-desc') ? 'asc' : th.classList.contains('sorted-asc') ? 'desc' : (higher ? 'desc' : 'asc');
  table.querySelectorAll('th').forEach(h=>h.classList.remove('sorted-asc','sorted-desc'));
  th.classList.add('sorted-'+dir);
  const body=table.tBodies[0]; const rows=Array.from(body.rows);
  rows.sort((a,b)=>{const x=parseFloat(a.cells[col].dataset.value), y=parseFloat(b.cells[col].dataset.value);
    const nx=Number.isNaN(x), ny=Number.isNaN(y); if(nx||ny) return nx-ny; return dir==='asc'?x-y:y-x;});
  rows.forEach((r,i)=>{r.cells[0].textContent=i+1; body.appendChild(r);});
}
function build(){
  const root=document.getElementById('tracks');
  DATA.tracks.forEach(t=>{
    const sec=document.createElement('section'); sec.id='track-'+t.name; sec.className='track';
    sec.innerHTML=`<h2>${esc(t.name)}: ${esc(t.title)}</h2><p class="desc">${esc(t.description)}</p><p class="desc">${esc(t.info)}</p>`;
    const absent=t.not_entered.length?'<ul class="not-entered">'+t.not_entered.map(a=>`<li class="missing">not on this track: <b>${esc(a.predictor)}</b>: ${esc(a.why)}</li>`).join('')+'</ul>':'';
    if(!t.entries.length){sec.insertAdjacentHTML('beforeend','<p>No entries yet.</p>'+absent);root.appendChild(sec);return;}
    const table=document.createElement('table'); table.className='board'; table.dataset.track=t.name;
    const head=['#','entry','kind'].concat(t.metrics.map(m=>DATA.metrics[m].label+(m===t.primary?' *':'')));
    table.innerHTML='<thead><tr>'+head.map((h,i)=>`<th${i>2?` class="sortable" data-metric="${t.metrics[i-3]}"`:''}>${h}</th>`).join('')+'</tr></thead><tbody></tbody>';
    t.entries.forEach((d,i)=>{const tr=table.tBodies[0].insertRow(); tr.className=d.kind; tr.dataset.entry=d.entry;
      tr.insertCell().textContent=i+1; const c=tr.insertCell(); c.textContent=d.entry; c.title=d.description||'';
      kindCell(tr.insertCell(), d.kind);
      t.metrics.forEach(m=>{const td=tr.insertCell(); const v=d.aggregate[m]; td.dataset.value=(v===null||v===undefined)?'NaN':v; td.textContent=fmt(m,v,(d.spread||{})[m]);});});
    table.querySelectorAll('th.sortable').forEach(th=>th.addEventListener('click',()=>sortTable(table, Array.from(th.parentNode.children).indexOf(th), th.dataset.metric)));
    sec.appendChild(table);
    const leg=document.createElement('div'); leg.className='legend';
    t.entries.forEach((d,i)=>{leg.insertAdjacentHTML('beforeend',`<span><i style="background:${COLORS[i%COLORS.length]}"></i>${esc(d.entry)}</span>`);});
    sec.appendChild(leg);
    const plots=document.createElement('div'); plots.className='plots'; sec.appendChild(plots);
    scatter(plots,t.entries); cdf(plots,t.entries);
    if(t.seeds){sec.insertAdjacentHTML('beforeend',`<p class="desc">${esc(t.seeds)}</p>`);}
    sec.insertAdjacentHTML('beforeend','<h3>Reference rows</h3><p class="caption">Not entries: the noise floor (one measurement of a network against another; no predictor can honestly do better) and published results, marked as published, with their source and how their protocol differs.</p>');
    sec.appendChild(referenceTable(t));
    const views=document.createElement('div'); views.className='views'; t.views.forEach(v=>views.appendChild(viewTable(v))); sec.appendChild(views);
    sec.insertAdjacentHTML('beforeend',absent);
    root.appendChild(sec);
  });
  if(DATA.missing.length){const sec=document.createElement('section'); sec.id='missing';
    sec.innerHTML='<h2>Tracks waiting for data</h2><ul>'+DATA.missing.map(m=>`<li class="missing"><b>${esc(m.name)}</b> (${esc(m.title)}): ${esc(m.reason)}</li>`).join('')+'</ul>';
    root.appendChild(sec);}
  document.body.dataset.ready='1';
}
build();
"""


def site_data(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    tracks, missing = [], []
    for name in sorted(status):
        if name == "__rejected__":
            continue
        st = status[name]
        if not st.get("available"):
            missing.append({"name": name, "title": st.get("title", ""), "reason": st.get("reason", "")})
            continue
        entries = [{"entry": d["entry"], "kind": d["meta"].get("kind", "submission"),
                    "description": d["meta"].get("description", ""), "aggregate": d["result"]["aggregate"],
                    "spread": {m: _spread(d, m) for m in st["metrics"]}, "plot": d["plot"]}
                   for d in ranked(by_track.get(name, []), st["primary"])]
        from .views import reference_rows, views_for

        ctx = _context(name, status, by_track)
        folds = max((len((d["result"].get("seeds") or {}).get("folds", [])) for d in ctx.entries), default=0)
        seeds = (f"Repeated draws: each figure is the mean over the {folds} seeds of the split ± their standard deviation."
                 if folds > 1 else "")
        info = (f"{st.get('scenarios', '?')} scenario(s), {st.get('networks', '?')} networks, {st.get('folds', '?')} fold(s). "
                f"{st.get('reference', '')}")
        tracks.append({"name": name, "title": st.get("title", ""), "description": st.get("description", ""), "info": info,
                       "metrics": st["metrics"], "primary": st["primary"], "entries": entries, "seeds": seeds,
                       "reference": reference_rows(ctx), "views": views_for(ctx),
                       "not_entered": [{"predictor": p, "why": w} for p, w in _not_entered(st)]})
    metrics = {n: {"label": METRICS.get(n).label, "unit": METRICS.get(n).unit,
                   "higher_is_better": METRICS.get(n).higher_is_better} for n in METRICS.names()}
    return {"tracks": tracks, "missing": missing, "metrics": metrics}


def render_html(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]]) -> str:
    # < > & escaped inside the JSON strings: no text (say "<!--<script>") can end or comment out the element
    data = (json.dumps(site_data(status, by_track), separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>latbench leaderboard</title>"
            f"<style>{_CSS}</style></head><body><h1>latbench leaderboard</h1>"
            "<p>Latency predictors scored on fixed splits of on-device latency data. Click a metric header to sort. "
            "Plots: predicted vs measured latency (log-log, dashed line = exact) and the cumulative distribution of "
            "absolute percentage errors, one colour per entry.</p><div id=\"tracks\"></div>"
            f"<script type=\"application/json\" id=\"board-data\">{data}</script>"
            f"<script>{_JS}</script></body></html>\n")


def render(results_dir: str | Path, readme: str | Path, site_dir: str | Path) -> tuple[Path, Path]:
    status, by_track = load_results(results_dir)
    readme, site = Path(readme), Path(site_dir) / "index.html"
    readme.write_text(render_markdown(status, by_track) + "\n")
    site.parent.mkdir(parents=True, exist_ok=True)
    site.write_text(render_html(status, by_track))
    return readme, site


__all__ = ["render", "render_markdown", "render_html", "load_results", "ranked", "site_data"]

const DATA = JSON.parse(document.getElementById('board-data').textContent);
const COLORS = ['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b','#e377c2','#17becf','#bcbd22','#7f7f7f'];
const NS = 'http://www.w3.org/2000/svg';
// Text from the data (names, descriptions, notes: a submitter's words among them) enters the page only
// as textContent or a DOM property, never as markup (no innerHTML with data); the renderer already
// escaped its control and bidi characters (leaderboard/render.py, printable()).
function node(tag, props, kids){
  const e=document.createElement(tag);
  for(const k in (props||{})){const v=props[k];
    if(k==='text') e.textContent=(v===undefined||v===null)?'':String(v);
    else if(k==='class') e.className=v;
    else if(k==='data') Object.assign(e.dataset, v);
    else e[k]=v;}
  (kids||[]).forEach(c=>{if(c) e.appendChild(c);});
  return e;
}
function head(table, labels){  // labels: strings, or {text, class, data} for a header cell
  const tr=table.createTHead().insertRow();
  labels.forEach(l=>tr.appendChild(node('th', typeof l==='string'?{text:l}:l)));
  table.createTBody();
}
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
  if(kind==='submission'){td.appendChild(document.createTextNode(' ')); td.appendChild(node('span',{class:'badge',text:'submitted'}));}
  if(kind==='published'){td.textContent=''; td.appendChild(node('span',{class:'pub-badge',text:'published'}));}
  if(kind==='floor'){td.textContent='noise';}
}
// a cell worse than the flops entry (leaderboard/below_flops.py): marked, the reason as its tooltip
function belowFlops(td, why){
  if(!why) return; td.classList.add('below-flops'); td.dataset.why=why; td.title='below FLOPs: '+why;
  const s=document.createElement('sup'); s.textContent='†'; td.appendChild(s);
}
function viewTable(v){
  const wrap=node('div',{class:'view',data:{view:v.id}},[node('h3',{text:v.title}),node('p',{class:'caption',text:v.caption})]);
  const t=document.createElement('table'); t.className='view-table'; t.dataset.view=v.id;
  if(v.layers){
    const sel=document.createElement('select'); sel.className='layer-select';
    v.layers.forEach((l,i)=>{const o=document.createElement('option'); o.value=i; o.textContent=l.label+' ('+l.kind+')'; sel.appendChild(o);});
    const draw=()=>{const l=v.layers[+sel.value]; t.dataset.layer=l.label;
      t.replaceChildren(); head(t, [''].concat(v.columns));
      v.row_labels.forEach((r,i)=>{const tr=t.tBodies[0].insertRow(); tr.className=l.kind; tr.insertCell().textContent=r;
        l.cells[i].forEach((x,j)=>{const td=tr.insertCell(); td.dataset.value=(x===null)?'NaN':x; td.textContent=fmt(v.metric,x);
          belowFlops(td, l.below_flops&&l.below_flops[i]?l.below_flops[i][j]:null);});});};
    sel.addEventListener('change',draw); wrap.appendChild(sel); draw();
  } else {
    head(t, ['', 'kind'].concat(v.columns));
    v.rows.forEach(r=>{const tr=t.tBodies[0].insertRow(); tr.className=r.kind; tr.dataset.label=r.label;
      const c=tr.insertCell(); c.textContent=r.label; c.title=r.note||''; kindCell(tr.insertCell(), r.kind);
      r.cells.forEach((x,i)=>{const td=tr.insertCell(); td.dataset.value=(x===null)?'NaN':x; td.textContent=fmt(v.metric,x,r.spread[i]);
        belowFlops(td, r.below_flops?r.below_flops[i]:null);});});
  }
  wrap.appendChild(t); return wrap;
}
function referenceTable(t){
  const tab=document.createElement('table'); tab.className='reference'; tab.dataset.track=t.name;
  head(tab, ['reference', 'kind'].concat(t.metrics.map(m=>t.labels[m]), ['source, protocol']));
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
// the overview: one row per track (best entry, FLOPs, noise floor on its primary metric) and a
// selector that shows one track's section, or all of them
function overview(){
  const box=document.getElementById('overview');
  const sel=node('select',{id:'track-select'},[node('option',{value:'',text:'all tracks'})].concat(
    DATA.overview.map(r=>node('option',{value:r.track,text:r.track+': '+r.title}))));
  const show=name=>{document.querySelectorAll('section.track').forEach(s=>{
    s.style.display=(!name||s.id==='track-'+name)?'':'none';});};
  sel.addEventListener('change',()=>show(sel.value));
  const table=node('table',{class:'overview'});
  head(table, ['track','data','primary metric','best entry','FLOPs','noise floor']);
  DATA.overview.forEach(r=>{const tr=table.tBodies[0].insertRow(); tr.dataset.track=r.track;
    const a=node('a',{href:'#track-'+r.track,text:r.track});
    a.addEventListener('click',()=>{sel.value=r.track; show(r.track);});
    tr.insertCell().appendChild(a);
    [r.data, r.metric_label, r.best?(r.best+' '+r.best_value):'no entries yet', r.flops, r.floor]
      .forEach(v=>{tr.insertCell().textContent=v;});});
  box.appendChild(node('h2',{text:'Overview'}));
  box.appendChild(node('p',{},[node('label',{text:'Show: '}),sel]));
  box.appendChild(table);
}
function build(){
  overview();
  const root=document.getElementById('tracks');
  DATA.tracks.forEach(t=>{
    const sec=node('section',{id:'track-'+t.name,class:'track'},[node('h2',{text:t.name+': '+t.title}),
      node('p',{class:'desc',text:t.description}),node('p',{class:'desc',text:t.info})]);
    const absent=()=>t.not_entered.length?node('ul',{class:'not-entered'},t.not_entered.map(a=>node('li',{class:'missing'},
      [document.createTextNode('not on this track: '),node('b',{text:a.predictor}),document.createTextNode(': '+a.why)]))):null;
    if(!t.entries.length){sec.appendChild(node('p',{text:'No entries yet.'})); const a=absent(); if(a) sec.appendChild(a); root.appendChild(sec); return;}
    const table=node('table',{class:'board',data:{track:t.name}});
    head(table, ['#','entry','kind'].concat(t.metrics.map(m=>({text:t.labels[m]+(m===t.primary?' *':''),class:'sortable',data:{metric:m}}))));
    t.entries.forEach((d,i)=>{const tr=table.tBodies[0].insertRow(); tr.className=d.kind; tr.dataset.entry=d.entry;
      tr.insertCell().textContent=i+1; const c=tr.insertCell(); c.textContent=d.entry; c.title=d.description||'';
      kindCell(tr.insertCell(), d.kind);
      t.metrics.forEach(m=>{const td=tr.insertCell(); const v=d.aggregate[m]; td.dataset.value=(v===null||v===undefined)?'NaN':v; td.textContent=fmt(m,v,(d.spread||{})[m]);});});
    table.querySelectorAll('th.sortable').forEach(th=>th.addEventListener('click',()=>sortTable(table, Array.from(th.parentNode.children).indexOf(th), th.dataset.metric)));
    sec.appendChild(table);
    const leg=node('div',{class:'legend'});
    t.entries.forEach((d,i)=>{const sw=node('i'); sw.style.background=COLORS[i%COLORS.length];
      leg.appendChild(node('span',{},[sw,document.createTextNode(d.entry)]));});
    sec.appendChild(leg);
    const plots=document.createElement('div'); plots.className='plots'; sec.appendChild(plots);
    scatter(plots,t.entries); cdf(plots,t.entries);
    if(t.seeds){sec.appendChild(node('p',{class:'desc',text:t.seeds}));}
    sec.insertAdjacentHTML('beforeend','<h3>Reference rows</h3><p class="caption">Not entries: the noise floor (one measurement of a network against another), the perfect predictor (the true latency scored against the recorded figure, which carries its own noise: an estimate of the best an entry can do, pessimistic where one outlying process inflated the spread; &ldquo;(retest)&rdquo;: the same from the test networks measured again in a later session, which also sees the machine&rsquo;s wander over a sweep) and published results, marked as published, with their source and how their protocol differs.</p>');
    sec.appendChild(referenceTable(t));
    const views=document.createElement('div'); views.className='views'; t.views.forEach(v=>views.appendChild(viewTable(v))); sec.appendChild(views);
    const a=absent(); if(a) sec.appendChild(a);
    root.appendChild(sec);
  });
  if(DATA.missing.length){
    root.appendChild(node('section',{id:'missing'},[node('h2',{text:'Tracks waiting for data'}),node('ul',{},DATA.missing.map(m=>
      node('li',{class:'missing'},[node('b',{text:m.name}),document.createTextNode(' ('+m.title+'): '+m.reason)])))]));}
  document.body.dataset.ready='1';
}
build();

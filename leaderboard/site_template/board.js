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
  if(kind==='floor'){td.textContent='noise';}
}
// a cell worse than the flops entry (leaderboard/below_flops.py): marked, the reason as its tooltip
function belowFlops(td, why){
  if(!why) return; td.classList.add('below-flops'); td.dataset.why=why; td.title='below FLOPs: '+why;
  const s=document.createElement('sup'); s.textContent='†'; td.appendChild(s);
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
        l.cells[i].forEach((x,j)=>{const td=tr.insertCell(); td.dataset.value=(x===null)?'NaN':x; td.textContent=fmt(v.metric,x);
          belowFlops(td, l.below_flops&&l.below_flops[i]?l.below_flops[i][j]:null);});});};
    sel.addEventListener('change',draw); wrap.appendChild(sel); draw();
  } else {
    t.innerHTML='<thead><tr><th></th><th>kind</th>'+v.columns.map(c=>`<th>${esc(c)}</th>`).join('')+'</tr></thead><tbody></tbody>';
    v.rows.forEach(r=>{const tr=t.tBodies[0].insertRow(); tr.className=r.kind; tr.dataset.label=r.label;
      const c=tr.insertCell(); c.textContent=r.label; c.title=r.note||''; kindCell(tr.insertCell(), r.kind);
      r.cells.forEach((x,i)=>{const td=tr.insertCell(); td.dataset.value=(x===null)?'NaN':x; td.textContent=fmt(v.metric,x,r.spread[i]);
        belowFlops(td, r.below_flops?r.below_flops[i]:null);});});
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
    sec.insertAdjacentHTML('beforeend','<h3>Reference rows</h3><p class="caption">Not entries: the noise floor (one measurement of a network against another), the perfect predictor (the true latency scored against the recorded figure, which carries its own noise: an estimate of the best an entry can do, pessimistic where one outlying process inflated the spread; &ldquo;(retest)&rdquo;: the same from the test networks measured again in a later session, which also sees the machine&rsquo;s wander over a sweep) and published results, marked as published, with their source and how their protocol differs.</p>');
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

// The xtrain dashboard page: runs from /api/events (server-sent events: every metrics.jsonl line,
// then new lines as training appends them), one uPlot chart per metric with the selected runs
// overlaid, EMA smoothing (debiased, as TensorBoard's), a log-scale toggle, and per-run details
// (stage-time breakdown, config). Design choice: everything shown is built with textContent and
// DOM nodes, never innerHTML, so run names and config values can hold any characters.
'use strict';

(() => {
  const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd',
                   '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
  const NOT_METRICS = new Set(['step', 'time', 'event', 'text']);

  const state = {
    runs: new Map(),    // name -> {name, color, visible, records: []}
    charts: new Map(),  // metric -> {card, plot, signature}
    smoothing: 0.6,
    logScale: false,
    filter: '',
    detailRun: '',
    connected: false,
    renders: 0,
  };

  // Requests carry the session cookie (same origin); the token never appears in the page.
  function api(path) {
    return fetch(path, {cache: 'no-store'}).then((r) => {
      if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
      return r.json();
    });
  }

  // el('td', {className: 'x'}, 'text', childNode): children are text or nodes, never HTML.
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    Object.assign(e, props || {});
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }

  function setStatus(text, kind) {
    const s = document.getElementById('status');
    s.textContent = text;
    s.className = 'status' + (kind ? ' ' + kind : '');
  }

  function ensureRun(name) {
    let run = state.runs.get(name);
    if (!run) {
      run = {name, color: PALETTE[state.runs.size % PALETTE.length], visible: true, records: []};
      state.runs.set(name, run);
      if (!state.detailRun) state.detailRun = name;
    }
    return run;
  }

  // ---- data ----------------------------------------------------------------------------------

  function metricKeys() {
    const keys = new Set();
    for (const run of state.runs.values()) {
      if (!run.visible) continue;
      for (const rec of run.records) {
        for (const [k, v] of Object.entries(rec)) {
          if (!NOT_METRICS.has(k) && typeof v === 'number') keys.add(k);
        }
      }
    }
    // Several words: a metric matching any of them is shown.
    const words = state.filter.toLowerCase().split(/[\s,]+/).filter(Boolean);
    return [...keys].filter((k) => !words.length || words.some((w) => k.toLowerCase().includes(w))).sort((a, b) => {
      const ga = groupOf(a), gb = groupOf(b);
      return ga === gb ? a.localeCompare(b) : groupRank(ga) - groupRank(gb) || ga.localeCompare(gb);
    });
  }

  function groupOf(key) {
    const i = key.indexOf('/');
    return i < 0 ? '(other)' : key.slice(0, i);
  }

  function groupRank(group) {
    const order = ['train', 'val', 'time', 'memory'];
    const i = order.indexOf(group);
    return i < 0 ? order.length : i;
  }

  // step -> value of `key` for one run (a later line with the same step wins: resumed runs).
  function seriesOf(run, key) {
    const m = new Map();
    for (const rec of run.records) {
      const v = rec[key];
      if (typeof v === 'number' && typeof rec.step === 'number') m.set(rec.step, v);
    }
    return m;
  }

  function pointCount(key, runName) {
    const run = state.runs.get(runName);
    return run ? seriesOf(run, key).size : 0;
  }

  // TensorBoard's smoothing: an exponential moving average, divided by (1 - w^n) so the first
  // points are not pulled towards 0.
  function smooth(values, w) {
    if (w <= 0) return values;
    let last = 0, n = 0;
    return values.map((v) => {
      if (v == null || !isFinite(v)) return v;
      last = last * w + (1 - w) * v;
      n += 1;
      return last / (1 - Math.pow(w, n));
    });
  }

  function chartData(key, runs) {
    const per = runs.map((r) => seriesOf(r, key));
    const steps = [...new Set(per.flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
    const data = [steps];
    for (const m of per) {
      let raw = steps.map((s) => (m.has(s) ? m.get(s) : null));
      if (state.logScale) raw = raw.map((v) => (v != null && v > 0 ? v : null));
      if (state.smoothing > 0) data.push(raw);
      data.push(smooth(raw, state.smoothing));
    }
    return data;
  }

  // ---- charts --------------------------------------------------------------------------------

  function chartWidth() {
    const charts = document.getElementById('charts');
    const columns = Math.max(1, Math.floor((charts.clientWidth + 12) / (420 + 12)));
    return Math.floor((charts.clientWidth - 12 * (columns - 1)) / columns) - 14;
  }

  function makePlot(key, runs, card) {
    const series = [{label: 'step'}];
    for (const r of runs) {
      if (state.smoothing > 0) {
        series.push({label: r.name + ' (raw)', class: 'raw', stroke: r.color + '44', width: 1, spanGaps: true,
                     points: {show: false}});
      }
      series.push({label: r.name, stroke: r.color, width: 2, spanGaps: true});
    }
    const opts = {
      title: key,
      width: chartWidth(),
      height: 220,
      scales: {x: {time: false}, y: state.logScale ? {distr: 3} : {}},
      axes: [{label: 'step'}, {size: 64}],
      series,
      legend: {live: true},
      cursor: {sync: {key: 'xtrain'}},
    };
    return new uPlot(opts, chartData(key, runs), card);
  }

  function renderCharts() {
    const container = document.getElementById('charts');
    const runs = [...state.runs.values()].filter((r) => r.visible);
    const keys = metricKeys();
    document.getElementById('no-charts').hidden = keys.length > 0;
    const signature = runs.map((r) => r.name).join('\n') + '|' + state.logScale + '|' + (state.smoothing > 0);
    for (const [key, chart] of state.charts) {  // charts whose metric is gone or filtered out
      if (!keys.includes(key)) {
        chart.plot.destroy();
        chart.card.remove();
        state.charts.delete(key);
      }
    }
    for (const key of keys) {  // sorted by group (train/, val/, time/, memory/, …): related charts sit together
      let chart = state.charts.get(key);
      if (chart && chart.signature !== signature) {
        chart.plot.destroy();
        chart.plot = makePlot(key, runs, chart.card);
        chart.signature = signature;
      } else if (chart) {
        chart.plot.setData(chartData(key, runs));
      } else {
        const card = el('div', {className: 'chart'});
        card.dataset.metric = key;
        chart = {card, plot: makePlot(key, runs, card), signature};
        state.charts.set(key, chart);
      }
      container.append(chart.card);  // (re)appending keeps the sorted order
      chart.card.dataset.points = String(runs.reduce((n, r) => n + seriesOf(r, key).size, 0));
    }
  }

  // ---- runs, details -------------------------------------------------------------------------

  function ago(unixSeconds) {
    if (!unixSeconds) return '';
    const s = Math.max(0, Date.now() / 1000 - unixSeconds);
    if (s < 90) return Math.round(s) + ' s ago';
    if (s < 5400) return Math.round(s / 60) + ' min ago';
    return Math.round(s / 3600) + ' h ago';
  }

  function renderRuns() {
    const list = document.getElementById('runs');
    list.replaceChildren();
    document.getElementById('no-runs').hidden = state.runs.size > 0;
    for (const run of state.runs.values()) {
      const box = el('input', {type: 'checkbox', checked: run.visible});
      box.addEventListener('change', () => {
        run.visible = box.checked;
        scheduleRender();
      });
      const last = run.records.length ? run.records[run.records.length - 1] : null;
      const meta = last ? 'step ' + last.step + (last.time ? ' · ' + ago(last.time) : '') : 'no metrics yet';
      const swatch = el('span', {className: 'swatch'});
      swatch.style.background = run.color;
      const item = el('li', {}, el('label', {}, box, swatch,
          el('span', {}, el('div', {className: 'run-name'}, run.name), el('div', {className: 'run-meta'}, meta))));
      item.dataset.run = run.name;
      list.append(item);
    }
    const select = document.getElementById('detail-run');
    const names = [...state.runs.keys()];
    if ([...select.options].map((o) => o.value).join('\n') !== names.join('\n')) {
      select.replaceChildren(...names.map((n) => el('option', {value: n}, n)));
    }
    select.value = state.detailRun;
  }

  function renderBreakdown(b) {
    const box = document.getElementById('breakdown');
    if (!b.stages || !b.stages.length) {
      box.replaceChildren(el('p', {className: 'muted'}, 'No time/* metrics in this run (set wall_clock_breakdown).'));
      return;
    }
    const head = el('tr', {}, ...['stage', 'mean ms', 'p50 ms', 'p90 ms', 'share', ''].map((h) => el('th', {}, h)));
    const rows = b.stages.map((s) => {
      const bar = el('span', {className: 'bar'});
      bar.style.width = Math.round(Math.min(1, s.share) * 120) + 'px';
      return el('tr', {}, el('td', {}, s.stage), el('td', {}, s.mean_ms.toFixed(2)), el('td', {}, s.p50_ms.toFixed(2)),
                el('td', {}, s.p90_ms.toFixed(2)), el('td', {}, (100 * s.share).toFixed(1) + '%'), el('td', {}, bar));
    });
    box.replaceChildren(el('table', {className: 'breakdown'}, el('thead', {}, head), el('tbody', {}, ...rows)),
                        el('p', {className: 'muted'}, 'over ' + b.steps + ' steps (the first left out as warm-up)'));
  }

  let detailsFetched = {run: '', at: 0, lines: -1};
  let detailsTimer = null;
  function refreshDetails(force) {
    const name = state.detailRun;
    const run = state.runs.get(name);
    if (!run) return;
    const now = Date.now();
    const changed = detailsFetched.run !== name;
    if (!force && !changed && run.records.length === detailsFetched.lines) return;
    if (!force && !changed && now - detailsFetched.at < 2000) {
      // At most one fetch per 2 s, but the last records must be fetched even when no event follows
      // them (a run that finished inside the window).
      if (!detailsTimer) {
        detailsTimer = setTimeout(() => { detailsTimer = null; refreshDetails(false); }, 2000 - (now - detailsFetched.at));
      }
      return;
    }
    detailsFetched = {run: name, at: now, lines: run.records.length};
    const path = '/api/runs/' + encodeURIComponent(name);
    api(path + '/breakdown').then(renderBreakdown).catch(() => {});
    if (changed || force) {
      api(path + '/config')
          .then((c) => { document.getElementById('config').textContent = JSON.stringify(c, null, 2); })
          .catch(() => { document.getElementById('config').textContent = '(no config.json)'; });
    }
  }

  // ---- rendering loop and events -------------------------------------------------------------

  let pending = false;
  function scheduleRender() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      renderRuns();
      renderCharts();
      refreshDetails(false);
      state.renders += 1;
    });
  }

  function connect() {
    const events = new EventSource('/api/events');
    events.addEventListener('reset', () => {
      for (const run of state.runs.values()) run.records = [];
      state.connected = true;
      setStatus('live', 'live');
      scheduleRender();
    });
    events.addEventListener('runs', (e) => {
      const names = new Set(JSON.parse(e.data).map((r) => r.name));
      for (const name of names) ensureRun(name);
      for (const name of [...state.runs.keys()]) if (!names.has(name)) state.runs.delete(name);
      if (!state.runs.has(state.detailRun)) state.detailRun = state.runs.size ? [...state.runs.keys()][0] : '';
      scheduleRender();
    });
    events.addEventListener('metrics', (e) => {
      const m = JSON.parse(e.data);
      ensureRun(m.run).records.push(...m.records);
      scheduleRender();
    });
    events.addEventListener('restart', (e) => {
      const run = state.runs.get(JSON.parse(e.data).run);
      if (run) run.records = [];
    });
    events.onerror = () => {
      state.connected = false;
      if (events.readyState !== EventSource.CLOSED) {  // the browser reconnects by itself
        setStatus('disconnected — retrying', 'error');
        return;
      }
      // Refused (401 without the session cookie, 503 when too many pages are open): say which,
      // and try again later.
      events.close();
      fetch('/api/runs', {cache: 'no-store'}).then((r) => r.status).catch(() => 0).then((status) => {
        setStatus(status === 401 ? 'unauthorized: open the address with ?token=… once'
                                 : 'disconnected (server busy or stopped) — retrying', 'error');
        setTimeout(connect, status === 401 ? 30000 : 10000);
      });
    };
  }

  function bindControls() {
    const slider = document.getElementById('smoothing');
    const shown = document.getElementById('smoothing-value');
    slider.addEventListener('input', () => {
      state.smoothing = Number(slider.value);
      shown.textContent = state.smoothing.toFixed(2);
      scheduleRender();
    });
    state.smoothing = Number(slider.value);
    document.getElementById('logscale').addEventListener('change', (e) => {
      state.logScale = e.target.checked;
      scheduleRender();
    });
    document.getElementById('filter').addEventListener('input', (e) => {
      state.filter = e.target.value.trim();
      scheduleRender();
    });
    document.getElementById('detail-run').addEventListener('change', (e) => {
      state.detailRun = e.target.value;
      refreshDetails(true);
    });
    let resize = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resize);
      resize = setTimeout(() => {
        for (const c of state.charts.values()) c.plot.setSize({width: chartWidth(), height: 220});
      }, 150);
    });
    setInterval(renderRuns, 5000);  // keeps "… s ago" current
  }

  // For tests and the browser console.
  window.xtrainDashboard = {state, pointCount, metricKeys};

  bindControls();
  connect();
})();

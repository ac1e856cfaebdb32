// The pool's story over time (GET /v1/pool/history): GPUs allocated against GPUs used, and
// memory allocated against memory used, over the last hour, day or week, for the whole pool and
// per user or group; and one GPU's utilisation and memory (GET /v1/gpus/{uuid}/telemetry).
import { api } from './api.js';
import { drawChart } from './chart.js';
import { el, mib, plural } from './format.js';
import { data, on } from './pool.js';
import { report } from './ui.js';

const COLORS = { total: '#9aa0a6', allocated: '#1565c0', used: '#2e7d32' };

function avg(points, field) {
  if (!points.length) return 0;
  return points.reduce((s, p) => s + (p[field] || 0), 0) / points.length;
}

export function create() {
  const range = el('select', { id: 'pool-range', 'aria-label': 'Period' },
    el('option', { value: 'hour' }, 'the last hour (per minute)'),
    el('option', { value: 'day' }, 'the last day (5 minutes)'),
    el('option', { value: 'week' }, 'the last week (hourly)'));
  const by = el('select', { id: 'pool-by', 'aria-label': 'Per' },
    el('option', { value: 'user' }, 'user'), el('option', { value: 'group' }, 'group'));
  const gpusChart = el('canvas', { id: 'pool-gpus-chart', class: 'chart', role: 'img',
                                   'aria-label': 'GPUs allocated and used over time' });
  const memChart = el('canvas', { id: 'pool-mem-chart', class: 'chart', role: 'img',
                                  'aria-label': 'GPU memory allocated and used over time' });
  const keyChart = el('canvas', { id: 'pool-key-chart', class: 'chart small', role: 'img',
                                  'aria-label': 'GPUs allocated and used by the selected user or group' });
  const note = el('p', { id: 'pool-note', class: 'note' });
  const keys = el('div', { id: 'pool-keys' });
  const keyTitle = el('h4', { id: 'pool-key-title' });

  const gpuSel = el('select', { id: 'history-gpu', 'aria-label': 'GPU' });
  const gpuRange = el('select', { id: 'history-range', 'aria-label': 'Period of the GPU history' },
    el('option', { value: '1s|10m' }, 'the last 10 minutes (per second)'),
    el('option', { value: '1m|1h' }, 'the last hour (per minute)'),
    el('option', { value: '5m|24h' }, 'the last day (5 minutes)'),
    el('option', { value: '1h|7d' }, 'the last week (hourly)'));
  const gpuChart = el('canvas', { id: 'history', class: 'chart', role: 'img',
                                  'aria-label': 'Utilisation and memory of the selected GPU over time' });
  const gpuNote = el('span', { id: 'history-note', class: 'note' });

  const legend = (items) => el('p', { class: 'legend' }, items.flatMap(([c, t, dash]) =>
    [el('span', { class: 'key' + (dash ? ' dash' : ''), dataset: { color: c } }), ' ' + t + ' ']));
  const root = el('section', { id: 'view-history', class: 'view', 'aria-labelledby': 'history-title' },
    el('h2', { id: 'history-title' }, 'History'),
    el('p', {}, el('label', { for: 'pool-range' }, 'Pool over '), range, ' ', note),
    el('h3', {}, 'GPUs: allocated against used'), gpusChart,
    legend([[COLORS.total, 'GPUs in the pool', true], [COLORS.allocated, 'allocated (compute shares held)'],
            [COLORS.used, 'used (sum of utilisation)']]),
    el('h3', {}, 'GPU memory: allocated against used'), memChart,
    legend([[COLORS.total, 'memory of the pool', true], [COLORS.allocated, 'allocated (slice quotas, whole GPUs)'],
            [COLORS.used, 'used']]),
    el('h3', {}, el('label', { for: 'pool-by' }, 'Per '), by), keys, keyTitle, keyChart,
    el('h3', {}, 'One GPU'),
    el('p', {}, el('label', { for: 'history-gpu' }, 'GPU '), gpuSel, ' ', el('label', { for: 'history-range' }, 'over '),
       gpuRange, ' ', gpuNote),
    gpuChart, legend([['#1565c0', 'utilisation %'], ['#b26a00', 'memory used %']]));
  for (const k of root.querySelectorAll('.key[data-color]')) k.style.background = k.dataset.color;

  let visible = false;
  let timer = null;
  let selectedKey = '';
  let gpu = '';
  let last = null;

  const toPoints = (points, field, scale = 1) => points.map((p) => ({ t: p.time_us / 1000, v: (p[field] || 0) * scale }));

  async function loadPool() {
    try {
      const h = await api('GET', '/v1/pool/history?range=' + range.value + '&by=' + by.value);
      last = h;
      renderPool(h);
    } catch (err) { report(err, 'Reading the pool history'); }
  }

  function renderPool(h) {
    const p = h.pool.points;
    const total = data.gpus.size || (p.length ? Math.round(p[p.length - 1].gpus) : 0);
    drawChart(gpusChart, [
      { label: 'GPUs', color: COLORS.total, dash: true, points: toPoints(p, 'gpus') },
      { label: 'allocated', color: COLORS.allocated, points: toPoints(p, 'gpus_allocated') },
      { label: 'used', color: COLORS.used, points: toPoints(p, 'gpus_used') },
    ], { yMax: 'auto', yFormat: (v) => String(v), emptyText: 'no samples yet (the pool is sampled once a minute)' });
    drawChart(memChart, [
      { label: 'memory', color: COLORS.total, dash: true, points: toPoints(p, 'memory_mib', 1 / 1024) },
      { label: 'allocated', color: COLORS.allocated, points: toPoints(p, 'memory_allocated_mib', 1 / 1024) },
      { label: 'used', color: COLORS.used, points: toPoints(p, 'memory_used_mib', 1 / 1024) },
    ], { yMax: 'auto', yFormat: (v) => v + 'G', emptyText: 'no samples yet' });
    const a = avg(p, 'gpus_allocated');
    const u = avg(p, 'gpus_used');
    note.textContent = plural(p.length, 'point') + ' at ' + h.resolution + ': on average ' + a.toFixed(1) + ' of ' + total +
      ' GPUs allocated, ' + u.toFixed(1) + ' used (' + (a > 0 ? Math.round((100 * u) / a) : 0) + '% of the allocated)' +
      (h.simulated ? '; simulated GPUs' : '');
    const rows = h.series.map((s) => {
      const sa = avg(s.points, 'gpus_allocated');
      const su = avg(s.points, 'gpus_used');
      return el('tr', { class: s.key === selectedKey ? 'selected' : '', dataset: { key: s.key },
                        tabindex: '0', onclick: () => selectKey(s.key), onkeydown: (e) => { if (e.key === 'Enter') selectKey(s.key); } },
        el('th', { scope: 'row' }, s.key), el('td', {}, sa.toFixed(2)), el('td', {}, su.toFixed(2)),
        el('td', {}, sa > 0 ? Math.round((100 * su) / sa) + '%' : '-'),
        el('td', {}, mib(Math.round(avg(s.points, 'memory_allocated_mib')))),
        el('td', {}, mib(Math.round(avg(s.points, 'memory_used_mib')))));
    });
    keys.replaceChildren(el('table', { class: 'table', id: 'pool-keys-table' },
      el('caption', {}, 'Averages over the period (click a row for its chart)'),
      el('thead', {}, el('tr', {}, [by.value, 'GPUs allocated', 'GPUs used', 'used of allocated', 'memory allocated',
        'memory used'].map((x) => el('th', { scope: 'col' }, x)))),
      el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: 6 }, 'no use in this period')))));
    if (!h.series.some((s) => s.key === selectedKey)) selectedKey = h.series.length ? h.series[0].key : '';
    renderKey();
  }

  function selectKey(key) {
    selectedKey = key;
    for (const tr of keys.querySelectorAll('tr[data-key]')) tr.classList.toggle('selected', tr.dataset.key === key);
    renderKey();
  }

  function renderKey() {
    const s = last && last.series.find((x) => x.key === selectedKey);
    keyTitle.textContent = s ? by.value + ' ' + s.key + ': GPUs allocated and used' : '';
    drawChart(keyChart, s ? [
      { label: 'allocated', color: COLORS.allocated, points: toPoints(s.points, 'gpus_allocated') },
      { label: 'used', color: COLORS.used, points: toPoints(s.points, 'gpus_used') },
    ] : [], { yMax: 'auto', yFormat: (v) => String(v), emptyText: 'nobody held GPUs in this period' });
  }

  function renderGpuChoices() {
    const gpus = [...data.gpus.values()];
    if (!gpu && gpus.length) gpu = gpus[0].uuid;
    if (gpuSel.options.length !== gpus.length) {
      gpuSel.replaceChildren(...gpus.map((g) => el('option', { value: g.uuid }, g.node + ' GPU ' + g.index + ' (' + g.model + ')')));
    }
    gpuSel.value = gpu;
  }

  async function loadGpu() {
    if (!gpu) return;
    try {
      const [resolution, since] = gpuRange.value.split('|');
      const t = await api('GET', '/v1/gpus/' + encodeURIComponent(gpu) + '/telemetry?resolution=' + resolution + '&since=' + since);
      const points = t.points || [];
      const g = data.gpus.get(t.uuid);
      const total = g ? g.memory_mib : 0;
      drawChart(gpuChart, [
        { label: 'utilisation', color: '#1565c0', points: points.map((p) => ({ t: p.time_us / 1000, v: p.utilization_pct })) },
        { label: 'memory', color: '#b26a00', points: points.map((p) => ({ t: p.time_us / 1000, v: total ? (100 * p.memory_used_mib) / total : 0 })) },
      ]);
      gpuNote.textContent = plural(points.length, 'point') + ' at ' + t.resolution + ' resolution' + (t.simulated ? ', simulated GPU' : '');
    } catch (err) { report(err, 'Reading the GPU history'); }
  }

  range.addEventListener('change', loadPool);
  by.addEventListener('change', () => { selectedKey = ''; loadPool(); });
  gpuSel.addEventListener('change', () => { gpu = gpuSel.value; loadGpu(); });
  gpuRange.addEventListener('change', loadGpu);
  on('gpus', ({ structural }) => { if (visible && structural) renderGpuChoices(); });

  return {
    id: 'history',
    el: root,
    show(params) {
      visible = true;
      if (params[0] === 'gpu' && params[1]) gpu = decodeURIComponent(params[1]);
      renderGpuChoices();
      loadPool();
      loadGpu();
      clearInterval(timer);
      timer = setInterval(() => { loadPool(); loadGpu(); }, 15000);
    },
    hide() { visible = false; clearInterval(timer); },
  };
}

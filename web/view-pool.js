// The pool at a glance: the summary (servers, GPUs, jobs by state, firing alerts) and every GPU
// of every server as one small tile in a compact grid, readable at 100 servers / 800 GPUs.
// A tile's colour is the GPU's state, its fill the utilisation, the bar at its right the memory
// used; its tooltip and the panel below (click a tile) say everything else, tenants included.
//
// Live updates touch only the tiles whose GPU changed (pool.js reports which); the grid is
// rebuilt only when GPUs or servers come or go.
import { el, mib, milli } from './format.js';
import { data, isSimulated, mark, on } from './pool.js';
import { jobLink } from './ui.js';

const STATES = ['idle', 'mixed', 'allocated', 'drained', 'unhealthy', 'down'];

export function create() {
  const summary = el('div', { id: 'summary', class: 'summary' });
  const legend = el('p', { class: 'legend grid-legend' },
    STATES.map((s) => el('span', { class: 'legend-item' }, el('span', { class: 'swatch ' + s }), ' ' + s)),
    el('span', { class: 'note' }, ' fill: utilisation; right bar: memory used; click a GPU for its tenants'));
  const grid = el('div', { id: 'gpu-grid', class: 'pool-grid' });
  const detail = el('section', { id: 'gpu-detail', class: 'gpu-detail', 'aria-live': 'polite' });
  const root = el('section', { id: 'view-pool', class: 'view', 'aria-labelledby': 'pool-title' },
    el('h2', { id: 'pool-title' }, 'Pool'), summary,
    el('h2', { id: 'gpus-title' }, 'GPUs'), legend, grid, detail);

  const tiles = new Map();  // uuid -> tile element
  const servers = new Map();  // node -> its section (header first)
  let selected = '';
  let visible = false;
  let dirty = { all: true, changed: new Set() };

  function renderSummary() {
    const s = data.summary;
    if (!s) return;
    const firing = [...data.alerts.values()].filter((a) => a.state === 'firing');
    const box = (title, part, extra) => {
      const byState = Object.entries((part && part.by_state) || {}).filter(([, n]) => n !== 0);
      return el('div', { class: 'box', dataset: { summary: title.toLowerCase() } },
        el('h3', {}, title), el('div', { class: 'total' }, 'total ' + ((part && part.total) || 0)),
        extra, byState.map(([k, n]) => el('div', {}, k.toLowerCase() + ': ' + n)));
    };
    // The compute share held, once: the by-state counts below it count GPUs, not shares.
    const held = s.gpus && s.gpus.allocated_milli !== undefined
      ? el('div', { class: 'held' }, 'share held: ' + milli(s.gpus.allocated_milli) + ' GPUs') : null;
    summary.replaceChildren(
      box('Servers', s.nodes), box('GPUs', s.gpus, held), box('Jobs', s.jobs),
      el('div', { class: 'box' + (firing.length ? ' alerting' : ''), dataset: { summary: 'alerts' } },
        el('h3', {}, 'Alerts'), el('a', { href: '#/alerts', class: 'total' }, firing.length + ' firing'),
        firing.filter((a) => a.severity === 'critical').length
          ? el('div', {}, 'critical: ' + firing.filter((a) => a.severity === 'critical').length) : null),
      isSimulated() ? el('div', { class: 'box' }, el('h3', {}, 'Hardware'), 'simulated GPUs') : null);
  }

  function tileText(g) {
    const r = g.telemetry;
    const parts = [g.node + ' GPU ' + g.index, g.model + (g.simulated && !/simulated/i.test(g.model) ? ' (simulated)' : ''),
      g.state + (g.health && g.health !== 'healthy' ? ', ' + g.health : '')];
    if (g.health_reason) parts.push(g.health_reason);
    if (r) {
      parts.push('utilisation ' + r.utilization_pct + '%',
        'memory ' + mib(r.memory_used_mib) + ' / ' + mib(r.memory_total_mib || g.memory_mib),
        r.temperature_c + ' °C');
    } else {
      parts.push('no telemetry yet');
    }
    parts.push('allocated ' + milli(g.allocated_milli) + ' of 1');
    for (const t of g.tenants || []) {
      parts.push('job ' + t.job_id + ' ' + (t.job_name || '') + ' (' + t.user + ')');
    }
    return parts.join('\n');
  }

  // Sets everything a tile shows from its GPU; the element is reused across updates.
  function paintTile(tile, g) {
    const r = g.telemetry;
    const util = r ? r.utilization_pct : 0;
    const total = r && r.memory_total_mib ? r.memory_total_mib : g.memory_mib;
    const mem = r && total ? Math.min(100, Math.round((100 * r.memory_used_mib) / total)) : 0;
    tile.className = 'tile ' + g.state + (g.uuid === selected ? ' selected' : '') +
                     (g.health && g.health !== 'healthy' ? ' sick' : '') + (r ? '' : ' quiet');
    tile.title = tileText(g);
    tile.setAttribute('aria-label', tile.title.replace(/\n/g, ', '));
    tile.dataset.state = g.state;
    tile.dataset.jobs = (g.tenants || []).map((t) => t.job_id).join(' ');
    tile.dataset.util = r ? String(util) : '';
    tile.firstChild.style.height = util + '%';
    tile.children[1].style.height = mem + '%';
  }

  function makeTile(g) {
    const tile = document.createElement('button');
    tile.type = 'button';
    tile.dataset.uuid = g.uuid;
    tile.dataset.node = g.node;
    tile.dataset.index = g.index;
    tile.append(el('span', { class: 'fill' }), el('span', { class: 'mem' }), el('span', { class: 'idx' }, String(g.index)));
    paintTile(tile, g);
    return tile;
  }

  function nodeHead(name, gpus) {
    const n = data.nodes.find((x) => x.name === name);
    const simulated = gpus.some((g) => g.simulated);
    const state = n ? n.state : '';
    return el('h3', { class: 'server-name', title: name + (state ? ' (' + state + ')' : '') +
                      (n && n.state_reason ? ': ' + n.state_reason : '') },
      el('span', { class: 'name' }, name), ' ',
      el('span', { class: 'server-state ' + state.toLowerCase() }, state.toLowerCase()),
      el('span', { class: 'note' }, ' ' + gpus.length + (simulated ? ' sim' : '')));
  }

  function renderGrid() {
    tiles.clear();
    servers.clear();
    const byNode = new Map();
    for (const g of data.gpus.values()) {
      if (!byNode.has(g.node)) byNode.set(g.node, []);
      byNode.get(g.node).push(g);
    }
    const frag = document.createDocumentFragment();
    // Servers in natural order (sim-node-2 before sim-node-10), as an admin reads them.
    const order = [...byNode].sort((a, b) => a[0].localeCompare(b[0], 'en', { numeric: true }));
    for (const [node, gpus] of order) {
      const box = el('div', { class: 'tiles' });
      for (const g of gpus) {
        const tile = makeTile(g);
        tiles.set(g.uuid, tile);
        box.append(tile);
      }
      const section = el('section', { class: 'server', dataset: { node }, 'aria-label': 'server ' + node },
        nodeHead(node, gpus), box);
      servers.set(node, section);
      frag.append(section);
    }
    if (byNode.size === 0) frag.append(el('p', {}, 'No GPUs registered yet.'));
    grid.replaceChildren(frag);
    renderDetail();
    // The first paint that shows this grid: after the next animation frame, the browser has
    // laid it out and painted it (bench/dashboard_bench's time to first render).
    const count = tiles.size;
    requestAnimationFrame(() => setTimeout(() => mark('grid-painted', { tiles: count }), 0));
  }

  function renderDetail() {
    const g = data.gpus.get(selected);
    if (!g) {
      detail.replaceChildren(el('p', { class: 'note' }, 'Select a GPU to see its tenants.'));
      return;
    }
    const r = g.telemetry;
    detail.replaceChildren(
      el('h3', {}, g.node + ' GPU ' + g.index + ': ' + g.model +
                   (g.simulated && !/simulated/i.test(g.model) ? ' (simulated)' : '')),
      el('p', {}, g.state + (g.health_reason ? ' — ' + g.health_reason : '') + '; allocated ' +
                  milli(g.allocated_milli) + ' of 1; ' + (r
        ? 'utilisation ' + r.utilization_pct + '%, memory ' + mib(r.memory_used_mib) + ' / ' +
          mib(r.memory_total_mib || g.memory_mib) + ', ' + r.temperature_c + ' °C, ' +
          Math.round(r.power_w) + ' W'
        : 'no telemetry yet') + '. ',
      el('a', { href: '#/history/gpu/' + encodeURIComponent(g.uuid) }, 'History of this GPU')),
      g.tenants && g.tenants.length
        ? el('ul', { class: 'tenants' }, g.tenants.map((t) => el('li', { class: 'tenant', dataset: { job: t.job_id } },
          jobLink(t.job_id, 'job ' + t.job_id), ' ' + (t.job_name || '') + ' (' + t.user + '): ' +
          (t.exclusive ? 'whole GPU' : milli(t.compute_milli) + ' compute, ' + mib(t.memory_mib)))))
        : el('p', { class: 'note' }, 'no tenants'));
  }

  grid.addEventListener('click', (e) => {
    const tile = e.target.closest('.tile');
    if (!tile) return;
    const old = tiles.get(selected);
    selected = tile.dataset.uuid === selected ? '' : tile.dataset.uuid;
    if (old) old.classList.remove('selected');
    if (selected) tile.classList.add('selected');
    renderDetail();
  });

  function flush() {
    if (dirty.all) {
      renderGrid();
    } else {
      for (const uuid of dirty.changed) {
        const tile = tiles.get(uuid);
        const g = data.gpus.get(uuid);
        if (tile && g) paintTile(tile, g);
      }
      if (dirty.changed.has(selected)) renderDetail();
    }
    dirty = { all: false, changed: new Set() };
    renderSummary();
  }

  on('gpus', ({ changed, structural }) => {
    if (structural) dirty.all = true;
    for (const u of changed) dirty.changed.add(u);
    if (visible) flush();
  });
  // Server headers carry the node's state: redraw those, not the tiles.
  function renderHeads() {
    for (const [node, section] of servers) {
      const gpus = [...section.querySelectorAll('.tile')].map((t) => data.gpus.get(t.dataset.uuid)).filter(Boolean);
      section.firstChild.replaceWith(nodeHead(node, gpus));
    }
  }
  on('nodes', () => { if (visible && !dirty.all) renderHeads(); });
  on('summary', () => { if (visible) renderSummary(); });
  on('alerts', () => { if (visible) renderSummary(); });

  return {
    id: 'pool',
    el: root,
    show() { visible = true; flush(); renderHeads(); },
    hide() { visible = false; },
    // For the benchmark and tests: the tile of a GPU.
    tileOf: (uuid) => tiles.get(uuid),
    // For the benchmark's baseline: the whole grid drawn again from the data, as the dashboard
    // did on any change before v2.
    rebuild() { dirty.all = true; flush(); },
  };
}

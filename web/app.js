// The gpool dashboard: the pool summary, every GPU with its tenants, the queue, the servers with
// drain/resume, the caller's account with quotas and fair share (and, for admins, every user and
// quota), and a utilisation/memory history chart per GPU. Data comes from the REST API only;
// /v1/watch pushes changes, and polling takes over while that socket is down.
import { ApiError, adoptTokenFromFragment, api, clearToken, getToken, setToken, watch } from './api.js';
import { drawChart } from './chart.js';
import { duration, el, mib, milli, stateCode } from './format.js';

const $ = (id) => document.getElementById(id);

const state = {
  account: null,      // GET /v1/account
  gpus: [],           // GET /v1/gpus
  nodes: [],          // GET /v1/nodes
  jobs: [],           // GET /v1/jobs (active ones)
  summary: null,      // GET /v1/summary or the watch's summary topic
  historyGpu: '',     // uuid shown in the chart
  drainReasons: {},   // node -> what the admin typed, kept across re-renders
  stopWatch: null,
  timers: [],
};

function isAdmin() { return state.account && state.account.role === 'admin'; }

// ---------------------------------------------------------------- errors and sign-in

function showError(message) {
  const box = $('error');
  box.textContent = message;
  box.hidden = !message;
}

// Reports a failed call. A 401 means the token is wrong or revoked: back to the sign-in form.
function report(err, what) {
  if (err instanceof ApiError && err.status === 401) {
    signOut('The API token was refused (' + err.message + '). Enter a valid token.');
    return;
  }
  showError(what + ': ' + err.message);
}

function signOut(message) {
  clearToken();
  if (state.stopWatch) state.stopWatch();
  state.stopWatch = null;
  state.timers.forEach(clearInterval);
  state.timers = [];
  $('main').hidden = true;
  $('logout').hidden = true;
  $('login').hidden = false;
  $('who').textContent = '';
  $('live').textContent = 'not connected';
  showError(message || '');
}

async function signIn() {
  showError('');
  let account;
  try {
    account = await api('GET', '/v1/account');
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      signOut('The API token was refused (' + err.message + '). Enter a valid token.');
    } else {
      $('login').hidden = false;
      showError('Cannot sign in: ' + err.message);
    }
    return;
  }
  state.account = account;
  $('login').hidden = true;
  $('main').hidden = false;
  $('logout').hidden = false;
  $('who').textContent = account.user + ' (' + account.role + ')';
  await refreshAll();
  state.stopWatch = watch({
    onMessage: onLiveMessage,
    onState: (up) => {
      $('live').textContent = up ? 'live' : 'polling (live updates reconnecting)';
      $('live').classList.toggle('on', up);
    },
    onPoll: refreshAll,
  });
  // Utilisation and memory change without events: refresh the GPUs and the chart regularly.
  state.timers.push(setInterval(refreshGpus, 5000));
  state.timers.push(setInterval(refreshHistory, 5000));
}

// ---------------------------------------------------------------- data

async function refreshAll() {
  await Promise.all([refreshSummary(), refreshGpus(), refreshNodes(), refreshJobs(),
                     refreshAccount()]);
  await refreshHistory();
}

async function refreshSummary() {
  try {
    state.summary = await api('GET', '/v1/summary');
    renderSummary();
  } catch (err) { report(err, 'Reading the summary'); }
}

async function refreshGpus() {
  try {
    state.gpus = (await api('GET', '/v1/gpus')).gpus;
    renderGpus();
    renderHistoryChoices();
  } catch (err) { report(err, 'Reading the GPUs'); }
}

async function refreshNodes() {
  try {
    state.nodes = (await api('GET', '/v1/nodes')).nodes;
    renderNodes();
  } catch (err) { report(err, 'Reading the servers'); }
}

async function refreshJobs() {
  try {
    const page = await api('GET', '/v1/jobs?state=PENDING&state=RUNNING&state=COMPLETING&limit=1000');
    state.jobs = page.jobs;
    renderQueue();
  } catch (err) { report(err, 'Reading the queue'); }
}

async function refreshAccount() {
  try {
    state.account = await api('GET', '/v1/account');
    let users = null;
    let quotas = null;
    if (isAdmin()) {
      [users, quotas] = await Promise.all([api('GET', '/v1/users'), api('GET', '/v1/quotas')]);
    }
    renderAccount(users, quotas);
  } catch (err) { report(err, 'Reading the account'); }
}

async function refreshHistory() {
  if (!state.historyGpu) return;
  try {
    const [resolution, since] = $('history-range').value.split('|');
    const t = await api('GET', '/v1/gpus/' + encodeURIComponent(state.historyGpu) +
                               '/telemetry?resolution=' + resolution + '&since=' + since);
    renderHistory(t);
  } catch (err) { report(err, 'Reading the GPU history'); }
}

// Coalesces a burst of live messages into one refresh per kind.
const pending = new Map();
function soon(fn) {
  if (pending.has(fn)) return;
  pending.set(fn, setTimeout(() => { pending.delete(fn); fn(); }, 200));
}

function onLiveMessage(topic, data) {
  if (topic === 'summary') {
    state.summary = data;
    renderSummary();
  } else if (topic === 'jobs') {
    soon(refreshJobs);
    soon(refreshGpus);
    soon(refreshAccount);
  } else if (topic === 'nodes') {
    soon(refreshNodes);
    soon(refreshGpus);
  }
}

// ---------------------------------------------------------------- actions

async function act(button, what, fn) {
  button.disabled = true;
  try {
    await fn();
    showError('');
  } catch (err) {
    report(err, what);
  } finally {
    button.disabled = false;
  }
}

function drainNode(name, button) {
  const reason = (state.drainReasons[name] || '').trim();
  if (!reason) {
    showError('Draining ' + name + ': give a reason first (it is shown to everyone).');
    return;
  }
  act(button, 'Draining ' + name, async () => {
    await api('POST', '/v1/nodes/' + encodeURIComponent(name) + '/drain', { reason });
    delete state.drainReasons[name];
    await Promise.all([refreshNodes(), refreshGpus()]);
  });
}

function resumeNode(name, button) {
  act(button, 'Resuming ' + name, async () => {
    await api('POST', '/v1/nodes/' + encodeURIComponent(name) + '/resume', {});
    await Promise.all([refreshNodes(), refreshGpus()]);
  });
}

function cancelJob(id, button) {
  act(button, 'Cancelling job ' + id, async () => {
    await api('POST', '/v1/jobs/' + id + '/cancel', {});
    await Promise.all([refreshJobs(), refreshGpus()]);
  });
}

// ---------------------------------------------------------------- views

// One summary box: {total, by_state: {STATE: n}} as "total N" and one line per state.
function counts(title, part, extra) {
  const byState = Object.entries((part && part.by_state) || {}).filter(([, n]) => n !== 0);
  return el('div', { class: 'box', dataset: { summary: title.toLowerCase() } },
    el('h3', { text: title }), el('div', { class: 'total' }, 'total ' + ((part && part.total) || 0)),
    extra, byState.map(([k, n]) => el('div', {}, k + ': ' + n)));
}

function renderSummary() {
  const s = state.summary;
  if (!s) return;
  const simulated = state.gpus.some((g) => g.simulated);
  const allocated = s.gpus && s.gpus.allocated_milli !== undefined
    ? el('div', {}, 'allocated ' + milli(s.gpus.allocated_milli)) : null;
  $('summary').replaceChildren(
    counts('Servers', s.nodes), counts('GPUs', s.gpus, allocated), counts('Jobs', s.jobs),
    simulated ? el('div', { class: 'box' }, el('h3', { text: 'Hardware' }), 'simulated GPUs') : null);
}

function gpuCard(g) {
  const r = g.telemetry;
  const used = r ? r.memory_used_mib : null;
  const total = r && r.memory_total_mib ? r.memory_total_mib : g.memory_mib;
  const memPct = used !== null && total ? Math.round((100 * used) / total) : 0;
  const util = r ? r.utilization_pct : null;
  const status = g.health === 'healthy' || !g.health ? g.state : g.state + ', ' + g.health;
  return el('article', {
    class: 'gpu ' + g.state, dataset: { uuid: g.uuid, node: g.node, index: g.index },
    'aria-label': 'GPU ' + g.index + ' of ' + g.node,
  },
  el('div', { class: 'head' }, el('span', {}, 'GPU ' + g.index),
     el('span', { class: 'state' }, status)),
  el('div', {}, g.model, g.simulated && !/simulated/i.test(g.model)
    ? el('span', { class: 'sim' }, ' (simulated)') : null),
  g.health_reason ? el('div', { class: 'note' }, g.health_reason) : null,
  el('div', { class: 'mem' }, 'memory ' + (used === null ? '?' : mib(used)) + ' / ' + mib(total)),
  el('div', { class: 'bar', role: 'presentation' }, el('span', { style: { width: memPct + '%' } })),
  el('div', { class: 'util' }, 'utilisation ' + (util === null ? '?' : util + '%')),
  el('div', { class: 'bar', role: 'presentation' }, el('span', { style: { width: (util || 0) + '%' } })),
  el('div', {}, 'allocated ' + milli(g.allocated_milli) + ' of 1'),
  g.tenants && g.tenants.length
    ? el('ul', { class: 'tenants' }, g.tenants.map((t) => el('li', { class: 'tenant', dataset: { job: t.job_id } },
      'job ' + t.job_id + ' ' + (t.job_name || '') + ' (' + t.user + '): ' +
      (t.exclusive ? 'whole GPU' : milli(t.compute_milli) + ' compute, ' + mib(t.memory_mib)))))
    : el('div', { class: 'note' }, 'no tenants'));
}

function renderGpus() {
  const byNode = new Map();
  for (const g of state.gpus) {
    if (!byNode.has(g.node)) byNode.set(g.node, []);
    byNode.get(g.node).push(g);
  }
  const sections = [];
  for (const [node, gpus] of byNode) {
    const simulated = gpus.some((g) => g.simulated);
    sections.push(el('section', { class: 'node', 'aria-label': 'node ' + node },
      el('h3', {}, node + ' (' + gpus.length + ' GPUs' + (simulated ? ', simulated' : '') + ')'),
      el('div', { class: 'grid' }, gpus.map(gpuCard))));
  }
  $('gpus').replaceChildren(...(sections.length ? sections : [el('p', {}, 'No GPUs registered yet.')]));
  renderSummary();
}

function jobGpus(job) {
  const res = (job.spec && job.spec.resources) || {};
  const gpus = milli(res.gpus_milli || 0);
  const tasks = (job.spec && job.spec.tasks) || 1;
  return tasks > 1 ? tasks + 'x' + gpus : gpus;
}

function mayCancel(job) {
  const a = state.account;
  if (!a) return false;
  return a.role === 'admin' || job.user === a.user ||
         (a.role === 'group-admin' && (a.admin_groups || []).includes(job.group));
}

function renderQueue() {
  const now = Date.now() * 1000;
  const rows = state.jobs.map((j) => {
    const started = j.start_time_us && j.state !== 'PENDING';
    const seconds = (now - (started ? j.start_time_us : j.submit_time_us)) / 1e6;
    const where = j.state === 'PENDING'
      ? '(' + (j.reason || 'None') + ')'
      : [...new Set((j.allocations || []).map((a) => a.node))].join(',');
    const cancel = mayCancel(j)
      ? el('button', { type: 'button', class: 'cancel', dataset: { job: j.id },
                       'aria-label': 'Cancel job ' + j.id,
                       onclick: (e) => cancelJob(j.id, e.currentTarget) }, 'Cancel')
      : null;
    return el('tr', { dataset: { job: j.id, state: j.state } },
      el('td', {}, String(j.id)), el('td', {}, (j.spec && j.spec.name) || ''), el('td', {}, j.user),
      el('td', { class: 'state', title: j.state }, stateCode(j.state)),
      el('td', {}, duration(seconds)), el('td', {}, jobGpus(j)), el('td', {}, where), el('td', {}, cancel));
  });
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 8 }, 'No pending or running jobs.')));
  $('queue').tBodies[0].replaceChildren(...rows);
}

function renderNodes() {
  const focused = document.activeElement && document.activeElement.dataset
    ? document.activeElement.dataset.reasonFor : undefined;
  const rows = state.nodes.map((n) => {
    const drained = n.state === 'DRAINING' || n.state === 'DRAINED';
    let actions = null;
    if (isAdmin()) {
      if (drained) {
        actions = el('button', { type: 'button', class: 'resume', dataset: { node: n.name },
                                 onclick: (e) => resumeNode(n.name, e.currentTarget) },
                     'Resume ' + n.name);
      } else {
        const input = el('input', { type: 'text', class: 'reason', placeholder: 'reason',
                                    'aria-label': 'Reason for draining ' + n.name,
                                    dataset: { reasonFor: n.name } });
        input.value = state.drainReasons[n.name] || '';
        input.addEventListener('input', () => { state.drainReasons[n.name] = input.value; });
        actions = el('span', {}, input, ' ',
          el('button', { type: 'button', class: 'drain', dataset: { node: n.name },
                         onclick: (e) => drainNode(n.name, e.currentTarget) }, 'Drain ' + n.name));
      }
    }
    const seen = n.last_seen_us ? duration((Date.now() * 1000 - n.last_seen_us) / 1e6) + ' ago' : '';
    return el('tr', { dataset: { node: n.name, state: n.state } },
      el('th', { scope: 'row' }, n.name), el('td', { class: 'state' }, n.state),
      // The drain/down reason, then what the agent found wrong with the server itself.
      el('td', {}, [n.state_reason, n.health_reason].filter(Boolean).join('; ')),
      el('td', {}, String((n.gpus || []).length)),
      el('td', {}, seen), el('td', {}, actions));
  });
  $('nodes').tBodies[0].replaceChildren(...rows);
  if (focused) {
    const again = document.querySelector('input[data-reason-for="' + CSS.escape(focused) + '"]');
    if (again) again.focus();
  }
}

function quotaText(limits) {
  const parts = [];
  if (limits.max_gpus_milli) parts.push('max ' + milli(limits.max_gpus_milli) + ' GPUs');
  if (limits.gpu_hours) parts.push(limits.gpu_hours + ' GPU-hours per ' +
                                   duration(limits.gpu_hours_period_seconds || 0));
  if (limits.guaranteed_gpus_milli) parts.push(milli(limits.guaranteed_gpus_milli) + ' guaranteed');
  if (limits.max_memory_per_task_mib) parts.push('max ' + mib(limits.max_memory_per_task_mib) + ' per task');
  if (limits.max_run_time_seconds) parts.push('max run ' + duration(limits.max_run_time_seconds));
  if (limits.priority_weight) parts.push('weight ' + limits.priority_weight);
  return parts.join(', ') || 'no limits';
}

function table(caption, headers, rows) {
  return el('table', { class: 'table' }, el('caption', {}, caption),
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: headers.length }, 'none'))));
}

function renderAccount(users, quotas) {
  const a = state.account;
  const fair = a.fair_share;
  const groupsUse = fair && fair.group_gpu_hours
    ? Object.entries(fair.group_gpu_hours).map(([g, h]) => g + ' ' + h.toFixed(2)).join(', ') : '';
  $('account').replaceChildren(
    el('p', {}, a.user + ' is ' + a.role + (a.groups.length ? ', groups ' + a.groups.join(', ') : '') +
       '. Now: ' + a.use.running_jobs + ' running, ' + a.use.pending_jobs + ' pending, ' +
       a.use.gpus + ' GPUs held.'),
    el('p', {}, fair
      ? 'Fair share: decayed usage ' + fair.user_gpu_hours.toFixed(2) + ' GPU-hours (half-life ' +
        duration(fair.half_life_seconds) + ')' + (groupsUse ? '; groups: ' + groupsUse : '') + '.'
      : 'Fair share: not available.'),
    table('Your quotas', ['Subject', 'Name', 'Limits', 'GPUs held', 'GPU-hours this period'],
      a.quotas.map((q) => el('tr', {}, el('td', {}, q.subject), el('td', {}, q.name),
        el('td', {}, quotaText(q.limits)), el('td', {}, q.used.gpus),
        el('td', {}, q.used.gpu_hours.toFixed(2))))));
  if (!users) {
    $('admin-users').replaceChildren();
    return;
  }
  $('admin-users').replaceChildren(
    table('Users', ['User', 'Uid', 'Role', 'Groups', 'Quota'],
      users.users.map((u) => el('tr', {}, el('th', { scope: 'row' }, u.name), el('td', {}, String(u.uid)),
        el('td', {}, u.role), el('td', {}, u.groups.join(', ')),
        el('td', {}, u.quota ? quotaText(u.quota) : '')))),
    table('Quotas', ['Subject', 'Name', 'Limits'],
      quotas.quotas.map((q) => el('tr', {}, el('td', {}, q.subject), el('td', {}, q.name),
        el('td', {}, quotaText(q.limits))))));
}

function renderHistoryChoices() {
  const select = $('history-gpu');
  const current = state.historyGpu || (state.gpus[0] && state.gpus[0].uuid) || '';
  const options = state.gpus.map((g) => el('option', { value: g.uuid },
    g.node + ' GPU ' + g.index + ' (' + g.model + ')'));
  const same = select.options.length === options.length &&
               [...select.options].every((o, i) => o.value === state.gpus[i].uuid);
  if (!same) select.replaceChildren(...options);
  select.value = current;
  if (current !== state.historyGpu) {
    state.historyGpu = current;
    refreshHistory();
  }
}

function renderHistory(t) {
  const points = t.points || [];
  const gpu = state.gpus.find((g) => g.uuid === t.uuid);
  const total = gpu ? gpu.memory_mib : 0;  // MiB; the points carry the memory used
  drawChart($('history'), [
    { label: 'utilisation', color: '#1565c0',
      points: points.map((p) => ({ t: p.time_us / 1000, v: p.utilization_pct })) },
    { label: 'memory', color: '#b26a00',
      points: points.map((p) => ({ t: p.time_us / 1000, v: total ? (100 * p.memory_used_mib) / total : 0 })) },
  ]);
  $('history-note').textContent = points.length + ' points at ' + t.resolution + ' resolution' +
    (t.simulated ? ', simulated GPU' : '');
}

// ---------------------------------------------------------------- start

function start() {
  adoptTokenFromFragment();
  $('login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const token = $('token-input').value.trim();
    if (!token) return;
    setToken(token);
    $('token-input').value = '';
    signIn();
  });
  $('logout').addEventListener('click', () => signOut(''));
  $('history-gpu').addEventListener('change', (e) => {
    state.historyGpu = e.target.value;
    refreshHistory();
  });
  $('history-range').addEventListener('change', refreshHistory);
  // A new #token=... on an open page (a second `gpool up` link pasted into the same tab).
  window.addEventListener('hashchange', () => {
    if (!new URLSearchParams(window.location.hash.slice(1)).has('token')) return;
    adoptTokenFromFragment();
    if (state.stopWatch) state.stopWatch();
    state.stopWatch = null;
    state.timers.forEach(clearInterval);
    state.timers = [];
    signIn();
  });
  if (getToken()) signIn();
  else signOut('');
}

start();

// The dashboard's data: what the REST API answered, kept in maps by id, and the live messages of
// /v1/watch applied to them one by one instead of re-reading whole lists. Views subscribe to a
// kind of data and are told what changed, so that they update only those parts of the page.
//
// Kinds and what a listener receives:
//   'gpus'    {changed: Set of uuids, structural: bool}  structural: GPUs or servers came or went
//   'nodes'   {}
//   'jobs'    {changed: Set of job ids, removed: Set of job ids}
//   'job'     {id, event}  one job event (for the job page)
//   'alerts'  {changed: Set of alert ids}
//   'summary' {}
//   'account' {}
import { api } from './api.js';

// Jobs the queue lists: those not yet ended. One page of GET /v1/jobs per load; the rest are
// reachable through loadMoreJobs (the list says it is cut).
export const ACTIVE = ['PENDING', 'RUNNING', 'COMPLETING'];
export const JOB_PAGE = 1000;

export const data = {
  account: null,
  summary: null,
  nodes: [],
  gpus: new Map(),      // uuid -> PoolGpu, in (node, index) order
  jobs: new Map(),      // id -> Job (active jobs), ascending id
  jobsNextAfter: null,  // non-null: more active jobs than were read (the list is cut)
  alerts: new Map(),    // id -> Alert (firing ones, and those that changed while the page is open)
  alertsNextBefore: null,
  lastEventSeq: 0,
};

// Timing marks the page records for bench/dashboard_bench ({what, tiles, at}: at is
// performance.now() of the first paint after the grid was drawn). Bounded: the last 100.
export const marks = [];

export function mark(what, detail) {
  marks.push(Object.assign({ what, at: performance.now() }, detail));
  if (marks.length > 100) marks.shift();
}

const listeners = new Map();

export function on(kind, fn) {
  if (!listeners.has(kind)) listeners.set(kind, new Set());
  listeners.get(kind).add(fn);
  return () => listeners.get(kind).delete(fn);
}

function emit(kind, detail = {}) {
  for (const fn of listeners.get(kind) || []) fn(detail);
}

export function isAdmin() { return data.account && data.account.role === 'admin'; }

export function isSimulated() {
  for (const g of data.gpus.values()) if (g.simulated) return true;
  return false;
}

// ---------------------------------------------------------------- loading

export async function loadAccount() {
  data.account = await api('GET', '/v1/account');
  emit('account');
}

export async function loadSummary() {
  data.summary = await api('GET', '/v1/summary');
  emit('summary');
}

export async function loadNodes() {
  data.nodes = (await api('GET', '/v1/nodes')).nodes;
  emit('nodes');
}

// A GPU's fields that the page shows: a GPU whose key did not change is not redrawn.
function gpuKey(g) {
  const r = g.telemetry;
  return JSON.stringify([g.state, g.health, g.health_reason, g.allocated_milli, g.model,
    r ? [r.utilization_pct, r.memory_used_mib, r.memory_total_mib, r.temperature_c] : null,
    g.tenants]);
}

// Reads every GPU, or only those of `node`, and applies the answer: GPUs whose shown fields
// changed are reported in `changed`; GPUs that appeared or disappeared make it `structural`.
export async function loadGpus(node) {
  const path = node ? '/v1/gpus?node=' + encodeURIComponent(node) : '/v1/gpus';
  const fresh = (await api('GET', path)).gpus;
  applyGpus(fresh, node);
}

// Applies a GPU list (all GPUs, or those of one node) to data.gpus; exported for the benchmark.
export function applyGpus(fresh, node) {
  const changed = new Set();
  let structural = false;
  const seen = new Set();
  for (const g of fresh) {
    seen.add(g.uuid);
    g._key = gpuKey(g);
    const old = data.gpus.get(g.uuid);
    if (!old) structural = true;
    else if (old._key === g._key) continue;
    changed.add(g.uuid);
  }
  for (const [uuid, g] of data.gpus) {
    if ((!node || g.node === node) && !seen.has(uuid)) structural = true;
  }
  if (structural) {
    // Rebuild the map in the API's (node, index) order, replacing only the part read.
    const all = node ? [...data.gpus.values()].filter((g) => g.node !== node).concat(fresh) : fresh;
    if (node) all.sort((x, y) => (x.node < y.node ? -1 : x.node > y.node ? 1 : x.index - y.index));
    data.gpus = new Map(all.map((g) => [g.uuid, g]));
  } else {
    for (const g of fresh) if (changed.has(g.uuid)) data.gpus.set(g.uuid, g);
  }
  if (structural || changed.size) emit('gpus', { changed, structural });
}

function jobsPath(after) {
  return '/v1/jobs?' + ACTIVE.map((s) => 'state=' + s).join('&') + '&limit=' + JOB_PAGE +
         (after ? '&after=' + after : '');
}

// The first page of active jobs (replacing what was read before).
export async function loadJobs() {
  const page = await api('GET', jobsPath(0));
  const removed = new Set(data.jobs.keys());
  data.jobs = new Map();
  for (const j of page.jobs) {
    data.jobs.set(j.id, j);
    removed.delete(j.id);
  }
  data.jobsNextAfter = page.next_after;
  emit('jobs', { changed: new Set(data.jobs.keys()), removed, reset: true });
}

// The next page of active jobs, added to those shown.
export async function loadMoreJobs() {
  if (data.jobsNextAfter === null) return;
  const page = await api('GET', jobsPath(data.jobsNextAfter));
  const changed = new Set();
  for (const j of page.jobs) {
    data.jobs.set(j.id, j);
    changed.add(j.id);
  }
  data.jobsNextAfter = page.next_after;
  emit('jobs', { changed, removed: new Set() });
}

export async function loadAlerts() {
  const page = await api('GET', '/v1/alerts?state=all&limit=200');
  data.alerts = new Map(page.alerts.map((a) => [a.id, a]));
  data.alertsNextBefore = page.next_before;
  emit('alerts', { changed: new Set(data.alerts.keys()), reset: true });
}

export async function loadMoreAlerts() {
  if (data.alertsNextBefore === null) return;
  const page = await api('GET', '/v1/alerts?state=all&limit=200&before=' + data.alertsNextBefore);
  for (const a of page.alerts) data.alerts.set(a.id, a);
  data.alertsNextBefore = page.next_before;
  emit('alerts', { changed: new Set(page.alerts.map((a) => a.id)) });
}

// ---------------------------------------------------------------- live messages

// Reads one job (its full record, for a job the list did not have or one that was placed).
async function fetchJob(id) {
  try {
    const job = await api('GET', '/v1/jobs/' + id);
    if (ACTIVE.includes(job.state)) data.jobs.set(id, job);
    else data.jobs.delete(id);
    emit('jobs', { changed: new Set([id]), removed: ACTIVE.includes(job.state) ? new Set() : new Set([id]) });
  } catch (err) {
    // Gone or no longer visible: drop it.
    if (data.jobs.delete(id)) emit('jobs', { changed: new Set(), removed: new Set([id]) });
  }
}

// Jobs to read alone, coalesced like the GPUs below: a burst of new jobs (an array of 1,000
// submitted) is one read of the list's first page instead of one read per job, and the list
// then says whether it is cut.
const jobsDue = new Set();
let jobsTimer = null;
const JOB_BURST = 20;
function fetchJobSoon(id) {
  jobsDue.add(id);
  if (jobsTimer !== null) return;
  jobsTimer = setTimeout(() => {
    jobsTimer = null;
    const due = [...jobsDue];
    jobsDue.clear();
    if (due.length > JOB_BURST) loadJobs().catch(() => {});
    else for (const id of due) fetchJob(id);
  }, 150);
}

// Nodes whose GPUs need a re-read (tenants changed), coalesced: one GET /v1/gpus?node= per node
// per burst of events.
const gpuNodesDue = new Set();
let gpuTimer = null;
function gpusOfSoon(nodes) {
  for (const n of nodes) gpuNodesDue.add(n);
  if (gpuTimer !== null) return;
  gpuTimer = setTimeout(() => {
    gpuTimer = null;
    const due = [...gpuNodesDue];
    gpuNodesDue.clear();
    // Many nodes at once (a burst of placements): one read of every GPU is cheaper.
    if (due.length > 8) loadGpus().catch(() => {});
    else for (const n of due) loadGpus(n).catch(() => {});
  }, 150);
}

const accountDue = { timer: null };
function accountSoon() {
  if (accountDue.timer !== null) return;
  accountDue.timer = setTimeout(() => {
    accountDue.timer = null;
    loadAccount().catch(() => {});
  }, 1000);
}

// One job event of the watch: the list is updated in place; a job not in the list, or one that
// was just placed (its allocations are new), is read alone.
export function applyJobEvent(ev) {
  if (ev.seq) data.lastEventSeq = Math.max(data.lastEventSeq, ev.seq);
  const id = ev.job_id;
  const known = data.jobs.get(id);
  const active = ACTIVE.includes(ev.to_state);
  if (!active) {
    if (known) {
      data.jobs.delete(id);
      emit('jobs', { changed: new Set(), removed: new Set([id]) });
    }
  } else if (!known || (ev.from_state !== ev.to_state && ev.to_state === 'RUNNING')) {
    // A new job beyond a cut list stays out of it (the cut notice already says there are more).
    if (known || data.jobsNextAfter === null || id < data.jobsNextAfter) fetchJobSoon(id);
  } else {
    known.state = ev.to_state;
    known.reason = ev.reason;
    emit('jobs', { changed: new Set([id]), removed: new Set() });
  }
  if (ev.from_state !== ev.to_state && (ev.nodes || []).length) gpusOfSoon(ev.nodes);
  if (ev.from_state !== ev.to_state) accountSoon();
  emit('job', { id, event: ev });
}

export function applyNodeChange(change) {
  const n = data.nodes.find((x) => x.name === change.node);
  if (n && change.change !== 'registered') {
    n.state = change.state;
    if (change.change === 'health') n.health_reason = change.reason === 'every GPU healthy' ? '' : change.reason;
    else n.state_reason = change.reason;
    emit('nodes');
  } else {
    loadNodes().catch(() => {});
  }
  gpusOfSoon([change.node]);
}

export function applyAlert(alert) {
  const old = data.alerts.get(alert.id);
  data.alerts.set(alert.id, Object.assign({}, old || {}, alert));
  emit('alerts', { changed: new Set([alert.id]) });
}

export function applySummary(summary) {
  data.summary = summary;
  emit('summary');
}

// The queue: pending and running jobs like `gpool queue` (id, name, user, state code, time,
// GPUs, node or pending reason) with Cancel where the caller may cancel. Rows are kept by job id
// and only the rows of jobs that changed are redrawn. The list reads 1,000 jobs at a time and
// says so when there are more ("Load more").
import { duration, el, milli, stateCode, count } from './format.js';
import { JOB_PAGE, data, loadMoreJobs, on } from './pool.js';
import { act, jobLink } from './ui.js';
import { api } from './api.js';

export function jobGpus(job) {
  const res = (job.spec && job.spec.resources) || {};
  const gpus = milli(res.gpus_milli || 0);
  const tasks = (job.spec && job.spec.tasks) || 1;
  return tasks > 1 ? tasks + 'x' + gpus : gpus;
}

export function mayCancel(job) {
  const a = data.account;
  if (!a) return false;
  return a.role === 'admin' || job.user === a.user ||
         (a.role === 'group-admin' && (a.admin_groups || []).includes(job.group));
}

// What a pending job waits for: the scheduler's words when gpoold gives them.
export function pendingText(j) {
  return '(' + (j.reason || 'None') + ')' + (j.reason_detail ? ' ' + j.reason_detail : '');
}

export function cancelJob(id, button) {
  return act(button, 'Cancelling job ' + id, () => api('POST', '/v1/jobs/' + id + '/cancel', {}));
}

export function create() {
  const body = el('tbody');
  const notice = el('p', { id: 'queue-cut', class: 'cut', hidden: true });
  const more = el('button', { type: 'button', id: 'queue-more', hidden: true }, 'Load ' + count(JOB_PAGE) + ' more');
  const filter = el('input', { type: 'search', id: 'queue-filter', placeholder: 'user, name, state or node',
                               'aria-label': 'Filter the queue' });
  const root = el('section', { id: 'view-jobs', class: 'view', 'aria-labelledby': 'queue-title' },
    el('h2', { id: 'queue-title' }, 'Queue'),
    el('p', {}, el('label', { for: 'queue-filter' }, 'Filter '), filter, ' ', el('span', { id: 'queue-count', class: 'note' })),
    notice,
    el('table', { id: 'queue', class: 'table' },
      el('thead', {}, el('tr', {}, ['Job', 'Name', 'User', 'State', 'Time', 'GPUs', 'Node (reason)'].map(
        (h) => el('th', { scope: 'col' }, h)), el('th', { scope: 'col' }, el('span', { class: 'sr-only' }, 'Actions')))),
      body),
    more);
  more.addEventListener('click', () => act(more, 'Reading more jobs', loadMoreJobs));

  const rows = new Map();  // job id -> tr
  let visible = false;
  let dirty = { all: true, changed: new Set(), removed: new Set() };
  let clock = null;

  function cells(j) {
    const now = Date.now() * 1000;
    const started = j.start_time_us && j.state !== 'PENDING';
    const seconds = (now - (started ? j.start_time_us : j.submit_time_us)) / 1e6;
    const where = j.state === 'PENDING' ? pendingText(j)
      : [...new Set((j.allocations || []).map((a) => a.node))].join(',');
    const cancel = mayCancel(j)
      ? el('button', { type: 'button', class: 'cancel', dataset: { job: j.id }, 'aria-label': 'Cancel job ' + j.id,
                       onclick: (e) => cancelJob(j.id, e.currentTarget) }, 'Cancel')
      : null;
    return [el('td', {}, jobLink(j.id)), el('td', {}, (j.spec && j.spec.name) || ''), el('td', {}, j.user),
      el('td', { class: 'state', title: j.state }, stateCode(j.state)),
      el('td', { class: 'time', dataset: { since: started ? j.start_time_us : j.submit_time_us } }, duration(seconds)),
      el('td', {}, jobGpus(j)), el('td', { class: 'where' }, where), el('td', {}, cancel)];
  }

  function rowOf(j) {
    const tr = el('tr', { dataset: { job: j.id, state: j.state } }, cells(j));
    tr.dataset.text = [j.id, j.spec && j.spec.name, j.user, j.state, stateCode(j.state), tr.children[6].textContent]
      .join(' ').toLowerCase();
    return tr;
  }

  function applyFilter() {
    const q = filter.value.trim().toLowerCase();
    let shown = 0;
    for (const tr of rows.values()) {
      tr.hidden = q !== '' && !tr.dataset.text.includes(q);
      if (!tr.hidden) shown += 1;
    }
    document.getElementById('queue-count').textContent =
      (q ? shown + ' of ' : '') + count(rows.size) + ' jobs listed';
  }

  function renderNotice() {
    const cut = data.jobsNextAfter !== null;
    notice.hidden = !cut;
    more.hidden = !cut;
    if (cut) {
      notice.textContent = 'The list is cut: it shows the first ' + count(data.jobs.size) +
        ' pending and running jobs (by id) and there are more. Load more, or use `gpool queue`.';
    }
  }

  function flush() {
    if (dirty.all) {
      rows.clear();
      const frag = document.createDocumentFragment();
      for (const j of data.jobs.values()) {
        const tr = rowOf(j);
        rows.set(j.id, tr);
        frag.append(tr);
      }
      body.replaceChildren(frag);
    } else {
      for (const id of dirty.removed) {
        const tr = rows.get(id);
        if (tr) tr.remove();
        rows.delete(id);
      }
      for (const id of dirty.changed) {
        const j = data.jobs.get(id);
        if (!j) continue;
        const tr = rowOf(j);
        const old = rows.get(id);
        if (old) {
          old.replaceWith(tr);
        } else {
          // In id order: before the first row with a larger id.
          let next = null;
          for (const [other, r] of rows) if (other > id && (next === null || other < next[0])) next = [other, r];
          body.insertBefore(tr, next ? next[1] : null);
        }
        rows.set(id, tr);
      }
    }
    dirty = { all: false, changed: new Set(), removed: new Set() };
    let empty = body.querySelector('tr.empty');
    if (rows.size === 0 && !empty) {
      body.append(el('tr', { class: 'empty' }, el('td', { colspan: 8 }, 'No pending or running jobs.')));
    } else if (rows.size > 0 && empty) {
      empty.remove();
    }
    renderNotice();
    applyFilter();
  }

  // The time column ticks without a redraw of the rows.
  function tick() {
    const now = Date.now() * 1000;
    for (const td of body.querySelectorAll('td.time')) td.textContent = duration((now - Number(td.dataset.since)) / 1e6);
  }

  filter.addEventListener('input', applyFilter);
  on('jobs', ({ changed, removed, reset }) => {
    if (reset) dirty.all = true;
    for (const id of changed) dirty.changed.add(id);
    for (const id of removed) { dirty.removed.add(id); dirty.changed.delete(id); }
    if (visible) flush();
  });
  // Who may cancel: redraw when the caller's role or administered groups change.
  let rights = '';
  on('account', () => {
    const a = data.account;
    const now = JSON.stringify([a.user, a.role, a.admin_groups]);
    if (now === rights) return;
    rights = now;
    dirty.all = true;
    if (visible) flush();
  });

  return {
    id: 'jobs',
    el: root,
    show() { visible = true; flush(); clock = setInterval(tick, 1000); },
    hide() { visible = false; clearInterval(clock); },
  };
}

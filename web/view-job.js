// One job's page (#/job/ID): its state and timeline (GET /v1/jobs/{id}/events), why it waits
// and when it is expected to start, its allocation, its GPU use over time
// (GET /v1/jobs/{id}/telemetry) and the tail of its log (GET /v1/jobs/{id}/log). The job's live
// events redraw it; while it runs, its use and log are re-read every 5 s.
import { api } from './api.js';
import { drawChart } from './chart.js';
import { dateTime, duration, el, mib, milli, plural, stateCode } from './format.js';
import { data, on } from './pool.js';
import { cancelJob, jobGpus, mayCancel } from './view-jobs.js';
import { report } from './ui.js';

const TAIL_BYTES = 8192;
const STATE_COLORS = {
  PENDING: '#b26a00', RUNNING: '#1565c0', COMPLETING: '#4f83cc', COMPLETED: '#2e7d32', FAILED: '#c62828',
  CANCELLED: '#6d6d6d', TIMEOUT: '#c62828', PREEMPTED: '#8e24aa', NODE_FAIL: '#c62828', OUT_OF_MEMORY: '#c62828',
};

// A command's argument as a shell would need it written (quoted when it has more than letters,
// digits and -_./=:,+@%).
function shellWord(arg) {
  return /^[A-Za-z0-9_\-./=:,+@%]+$/.test(arg) ? arg : "'" + arg.replace(/'/g, "'\\''") + "'";
}

export function create() {
  const head = el('div', { id: 'job-head' });
  const timeline = el('div', { id: 'job-timeline' });
  const alloc = el('div', { id: 'job-allocation' });
  const canvas = el('canvas', { id: 'job-chart', class: 'chart', role: 'img', 'aria-label': 'GPU use of this job over time' });
  const chartNote = el('p', { id: 'job-chart-note', class: 'note' });
  const logBox = el('pre', { id: 'job-log', class: 'log', tabindex: '0' });
  const logNote = el('p', { id: 'job-log-note', class: 'note' });
  const streamSel = el('select', { id: 'job-log-stream', 'aria-label': 'Log stream' },
    el('option', { value: 'stdout' }, 'stdout'), el('option', { value: 'stderr' }, 'stderr'));
  const taskSel = el('input', { id: 'job-log-task', type: 'number', min: '0', value: '0', class: 'narrow',
                                'aria-label': 'Task' });
  const root = el('section', { id: 'view-job', class: 'view', 'aria-labelledby': 'job-title' },
    el('h2', { id: 'job-title' }, 'Job'), head,
    el('h3', {}, 'Timeline'), timeline,
    el('h3', {}, 'Allocation'), alloc,
    el('h3', {}, 'GPU use'), canvas,
    el('p', { class: 'legend' }, el('span', { class: 'key util' }), ' utilisation % ', el('span', { class: 'key mem' }),
       ' memory used % of its GPUs'), chartNote,
    el('h3', {}, 'Log tail'), el('p', {}, el('label', { for: 'job-log-task' }, 'task '), taskSel, ' ', streamSel), logNote, logBox);

  let id = 0;
  let job = null;
  let timer = null;
  let loading = null;

  async function load() {
    const wanted = id;
    try {
      const [j, ev] = await Promise.all([api('GET', '/v1/jobs/' + wanted), api('GET', '/v1/jobs/' + wanted + '/events')]);
      if (wanted !== id) return;
      job = j;
      renderHead(j);
      renderTimeline(j, ev.events || []);
      renderAllocation(j);
      await Promise.all([loadUse(), loadLog()]);
    } catch (err) {
      if (wanted !== id) return;
      head.replaceChildren(el('p', { class: 'error-inline' }, 'Job ' + wanted + ': ' + err.message));
      report(err, 'Reading job ' + wanted);
    }
  }

  function renderHead(j) {
    const rows = [
      ['State', stateCode(j.state) + ' ' + j.state + (j.reason ? ' (' + j.reason + ')' : '') +
                (j.exit_code !== undefined && j.exit_code !== null ? ', exit code ' + j.exit_code : '')],
      ['User / group', j.user + ' / ' + (j.group || '(no group)')],
      ['Command', ((j.spec && j.spec.command) || []).map(shellWord).join(' ')],
      ['GPUs per task', jobGpus(j) + (j.spec && j.spec.qos ? ', QoS ' + j.spec.qos : '')],
      ['Submitted', dateTime(j.submit_time_us)],
    ];
    if (j.state === 'PENDING') {
      rows.push(['Waiting for', (j.reason || 'None') + (j.reason_detail ? ': ' + j.reason_detail : '')]);
      rows.push(['Expected start', j.expected_start_us
        ? dateTime(j.expected_start_us) + ' (in ' + duration((j.expected_start_us - Date.now() * 1000) / 1e6) + ')'
        : 'no estimate (no reservation holds resources for it yet)']);
    }
    if (j.start_time_us) rows.push(['Started', dateTime(j.start_time_us)]);
    if (j.end_time_us) rows.push(['Ended', dateTime(j.end_time_us)]);
    if (j.start_time_us) {
      rows.push(['Run time', duration(((j.end_time_us || Date.now() * 1000) - j.start_time_us) / 1e6) +
                 (j.spec && j.spec.time_limit_seconds ? ' of ' + duration(j.spec.time_limit_seconds) : '')]);
    }
    if (j.requeue_count) rows.push(['Requeued', j.requeue_count + ' times']);
    const cancel = mayCancel(j) && ['PENDING', 'RUNNING'].includes(j.state)
      ? el('button', { type: 'button', class: 'cancel', dataset: { job: j.id },
                       onclick: (e) => cancelJob(j.id, e.currentTarget) }, 'Cancel job ' + j.id)
      : null;
    document.getElementById('job-title').textContent = 'Job ' + j.id + ((j.spec && j.spec.name) ? ': ' + j.spec.name : '');
    head.replaceChildren(el('dl', { class: 'facts', dataset: { state: j.state } },
      rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { dataset: { fact: k.toLowerCase().replace(/[^a-z]+/g, '-') } }, v)])), cancel);
  }

  // The states as segments of one bar, from submission to now (or the end), and the events.
  function renderTimeline(j, events) {
    const end = j.end_time_us || Date.now() * 1000;
    const begin = events.length ? events[0].time_us : j.submit_time_us;
    const span = Math.max(1, end - begin);
    const changes = events.filter((e, i) => i === 0 || e.to_state !== events[i - 1].to_state);
    const bar = el('div', { class: 'timeline-bar', role: 'img',
                            'aria-label': changes.map((e) => e.to_state).join(' then ') });
    changes.forEach((e, i) => {
      const until = i + 1 < changes.length ? changes[i + 1].time_us : end;
      const seg = el('span', { class: 'seg', title: e.to_state + ' ' + duration((until - e.time_us) / 1e6),
                               dataset: { state: e.to_state } }, stateCode(e.to_state));
      seg.style.width = Math.max(2, (100 * (until - e.time_us)) / span) + '%';
      seg.style.background = STATE_COLORS[e.to_state] || '#999';
      bar.append(seg);
    });
    timeline.replaceChildren(bar,
      el('table', { class: 'table', id: 'job-events' },
        el('thead', {}, el('tr', {}, ['Time', 'From', 'To', 'Reason'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, events.map((e) => el('tr', { dataset: { to: e.to_state } },
          el('td', {}, dateTime(e.time_us)), el('td', {}, e.from_state || 'submitted'), el('td', {}, e.to_state),
          el('td', {}, e.reason))))));
  }

  function renderAllocation(j) {
    const allocs = j.allocations || [];
    if (!allocs.length) {
      alloc.replaceChildren(el('p', { class: 'note' }, j.state === 'PENDING' ? 'Not placed yet.' : 'No allocation.'));
      return;
    }
    const gpuName = (uuid) => {
      const g = data.gpus.get(uuid);
      return g ? g.node + ' GPU ' + g.index + ' (' + g.model + ')' : uuid;
    };
    alloc.replaceChildren(el('table', { class: 'table', id: 'job-alloc' },
      el('thead', {}, el('tr', {}, ['Task', 'Server', 'GPUs', 'CPUs', 'RAM'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, allocs.map((a) => el('tr', {},
        el('td', {}, String(a.task)), el('td', {}, a.node),
        el('td', {}, el('ul', { class: 'plain' }, a.slices.map((s) => el('li', { dataset: { gpu: s.gpu_uuid } },
          gpuName(s.gpu_uuid) + ': ' + (s.exclusive ? 'whole GPU' : milli(s.compute_milli) + ' compute, ' + mib(s.memory_mib)))))),
        el('td', {}, milli(a.cpus_milli)), el('td', {}, mib(a.ram_mib)))))));
  }

  async function loadUse() {
    if (!job || !job.start_time_us) {
      drawChart(canvas, [], { emptyText: 'not started' });
      chartNote.textContent = '';
      return;
    }
    const ran = ((job.end_time_us || Date.now() * 1000) - job.start_time_us) / 1e6;
    // Per second while it is young, per minute after.
    const resolution = ran <= 600 && !job.end_time_us ? '1s' : '1m';
    const since = Math.floor(job.start_time_us / 1e6) - 60;
    const t = await api('GET', '/v1/jobs/' + job.id + '/telemetry?resolution=' + resolution + '&since=' + since);
    const memTotal = (task) => task.gpus.reduce((sum, uuid) => {
      const g = data.gpus.get(uuid);
      return sum + (g ? g.memory_mib : 0);
    }, 0);
    const series = [];
    const palette = [['#1565c0', '#b26a00'], ['#2e7d32', '#8e24aa'], ['#00838f', '#c62828']];
    t.tasks.forEach((task, i) => {
      const [cu, cm] = palette[i % palette.length];
      const total = memTotal(task);
      const suffix = t.tasks.length > 1 ? ' task ' + task.task : '';
      series.push({ label: 'utilisation' + suffix, color: cu,
                    points: task.points.map((p) => ({ t: p.time_us / 1000, v: p.utilization_pct })) });
      if (total) {
        series.push({ label: 'memory' + suffix, color: cm, dash: true,
                      points: task.points.map((p) => ({ t: p.time_us / 1000, v: (100 * p.memory_used_mib) / total })) });
      }
    });
    drawChart(canvas, series, { emptyText: 'no telemetry for this job yet' });
    const points = t.tasks.reduce((n, task) => n + task.points.length, 0);
    chartNote.textContent = plural(points, 'point') + ' at ' + t.resolution + ' resolution over ' + plural(t.tasks.length, 'task') +
      (t.tasks.some((task) => task.gpus.some((u) => data.gpus.get(u) && data.gpus.get(u).simulated)) ? ', simulated GPUs' : '');
  }

  async function loadLog() {
    if (!job || !job.allocations || !job.allocations.length) {
      logBox.textContent = '';
      logNote.textContent = 'No log before the job is placed.';
      return;
    }
    const task = Math.max(0, Number(taskSel.value) || 0);
    const base = '/v1/jobs/' + job.id + '/log?task=' + task + '&stream=' + streamSel.value;
    // The size first (one byte), then the last TAIL_BYTES. A log on another server may answer
    // `pending` while its agent is asked: ask again shortly, a few times.
    const read = async (offset, limit) => {
      for (let i = 0; i < 20; i += 1) {
        const c = await api('GET', base + '&offset=' + offset + '&limit=' + limit);
        if (!c.pending) return c;
        await new Promise((r) => setTimeout(r, 250));
      }
      return null;
    };
    const first = await read(0, 1);
    if (!first) {
      logNote.textContent = 'The log is on ' + (job.allocations[0].node) + ' and its agent has not answered yet.';
      return;
    }
    const offset = Math.max(0, first.size - TAIL_BYTES);
    const chunk = offset === 0 && first.size <= 1 ? first : await read(offset, TAIL_BYTES);
    if (!chunk) return;
    let text = chunk.data;
    if (offset > 0) text = text.slice(text.indexOf('\n') + 1);  // start at a whole line
    logBox.textContent = text;
    logBox.scrollTop = logBox.scrollHeight;
    logNote.textContent = (offset > 0 ? 'the last ' + (chunk.next_offset - offset) + ' of ' : '') + first.size +
      ' bytes of ' + chunk.path + ' on ' + chunk.node + (chunk.complete ? ' (complete)' : '');
  }

  function reload() {
    if (loading) return;
    loading = load().finally(() => { loading = null; });
  }

  streamSel.addEventListener('change', () => loadLog().catch((e) => report(e, 'Reading the log')));
  taskSel.addEventListener('change', () => loadLog().catch((e) => report(e, 'Reading the log')));
  on('job', ({ id: changed }) => { if (changed === id) reload(); });

  return {
    id: 'job',
    el: root,
    show(params) {
      const wanted = Number(params[0]);
      if (wanted !== id) {
        id = wanted;
        job = null;
        head.replaceChildren(el('p', { class: 'note' }, 'Reading job ' + id + '…'));
        timeline.replaceChildren();
        alloc.replaceChildren();
        logBox.textContent = '';
        logNote.textContent = '';
        taskSel.value = '0';
      }
      reload();
      clearInterval(timer);
      timer = setInterval(() => {
        if (job && ['RUNNING', 'COMPLETING'].includes(job.state)) {
          loadUse().catch(() => {});
          loadLog().catch(() => {});
        }
      }, 5000);
    },
    hide() { clearInterval(timer); },
  };
}

// Alerts (docs/alerts.md): firing ones first, then the resolved, newest first; admins
// acknowledge. Changes arrive on the watch's alerts topic and are applied one by one.
import { api } from './api.js';
import { dateTime, duration, el } from './format.js';
import { applyAlert, data, isAdmin, loadMoreAlerts, on } from './pool.js';
import { act, jobLink } from './ui.js';

export function create() {
  const firing = el('div', { id: 'alerts-firing' });
  const resolved = el('div', { id: 'alerts-resolved' });
  const more = el('button', { type: 'button', id: 'alerts-more', hidden: true }, 'Older alerts');
  const root = el('section', { id: 'view-alerts', class: 'view', 'aria-labelledby': 'alerts-title' },
    el('h2', { id: 'alerts-title' }, 'Alerts'),
    el('p', { class: 'note' }, 'Built-in rules (gpoold.toml [alerts]); webhooks get the same alerts. ' +
       'Acknowledging tells the other admins someone is on it; the alert resolves only when its cause is gone.'),
    el('h3', {}, 'Firing'), firing, el('h3', {}, 'Resolved'), resolved, more);
  more.addEventListener('click', () => act(more, 'Reading older alerts', loadMoreAlerts));
  let visible = false;

  function ack(a, button) {
    act(button, 'Acknowledging alert ' + a.id, async () => {
      const updated = await api('POST', '/v1/alerts/' + a.id + '/ack', {});
      applyAlert(updated);
    });
  }

  function labelsOf(a) {
    const l = a.labels || {};
    const parts = [];
    for (const key of ['Hostname', 'gpu', 'UUID', 'user', 'pid']) if (l[key]) parts.push(key + '=' + l[key]);
    return el('span', { class: 'labels' }, parts.join(' '), l.hpc_job ? [' ', jobLink(l.hpc_job, 'job ' + l.hpc_job)] : null);
  }

  function row(a) {
    const acked = a.acked_by
      ? el('span', { class: 'acked' }, 'acknowledged by ' + a.acked_by + ' ' + dateTime(a.acked_us))
      : (isAdmin() && a.state === 'firing'
        ? el('button', { type: 'button', class: 'ack', dataset: { alert: a.id },
                         onclick: (e) => ack(a, e.currentTarget) }, 'Acknowledge')
        : el('span', { class: 'note' }, 'not acknowledged'));
    const lasted = a.state === 'firing' ? 'for ' + duration((Date.now() * 1000 - a.started_us) / 1e6)
      : 'lasted ' + duration((a.resolved_us - a.started_us) / 1e6);
    return el('tr', { dataset: { alert: a.id, state: a.state, severity: a.severity } },
      el('td', { class: 'sev ' + a.severity }, a.severity), el('td', {}, a.alertname),
      el('td', {}, a.summary, el('br'), labelsOf(a)),
      el('td', {}, dateTime(a.started_us), el('br'), el('span', { class: 'note' }, lasted)), el('td', {}, acked));
  }

  function tableOf(list, id) {
    const head = ['Severity', 'Alert', 'What', 'Since', 'Acknowledged'];
    return el('table', { class: 'table alerts', id },
      el('thead', {}, el('tr', {}, head.map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, list.length ? list.map(row) : el('tr', {}, el('td', { colspan: head.length }, 'none'))));
  }

  function render() {
    const all = [...data.alerts.values()].sort((x, y) => y.id - x.id);
    const now = all.filter((a) => a.state === 'firing')
      .sort((x, y) => (x.severity === y.severity ? y.id - x.id : x.severity === 'critical' ? -1 : 1));
    firing.replaceChildren(tableOf(now, 'alerts-firing-table'));
    resolved.replaceChildren(tableOf(all.filter((a) => a.state !== 'firing'), 'alerts-resolved-table'));
    more.hidden = data.alertsNextBefore === null;
  }

  on('alerts', () => { if (visible) render(); });
  on('account', () => { if (visible) render(); });
  return { id: 'alerts', el: root, show() { visible = true; render(); }, hide() { visible = false; } };
}

// The caller's account: role, groups, current use, quotas with what is used of them, and fair
// share (decayed GPU-hours); admins also see every user record and quota.
import { api } from './api.js';
import { duration, el, mib, milli } from './format.js';
import { data, isAdmin, on } from './pool.js';
import { report, table } from './ui.js';

export function quotaText(limits) {
  const parts = [];
  if (limits.max_gpus_milli) parts.push('max ' + milli(limits.max_gpus_milli) + ' GPUs');
  if (limits.gpu_hours) parts.push(limits.gpu_hours + ' GPU-hours per ' + duration(limits.gpu_hours_period_seconds || 0));
  if (limits.guaranteed_gpus_milli) parts.push(milli(limits.guaranteed_gpus_milli) + ' guaranteed');
  if (limits.max_memory_per_task_mib) parts.push('max ' + mib(limits.max_memory_per_task_mib) + ' per task');
  if (limits.max_run_time_seconds) parts.push('max run ' + duration(limits.max_run_time_seconds));
  if (limits.priority_weight) parts.push('weight ' + limits.priority_weight);
  return parts.join(', ') || 'no limits';
}

export function create() {
  const mine = el('div', { id: 'account' });
  const admin = el('div', { id: 'admin-users' });
  const root = el('section', { id: 'view-account', class: 'view', 'aria-labelledby': 'account-title' },
    el('h2', { id: 'account-title' }, 'Account, quotas and fair share'), mine, admin);
  let visible = false;

  function renderMine() {
    const a = data.account;
    if (!a) return;
    const fair = a.fair_share;
    const groupsUse = fair && fair.group_gpu_hours
      ? Object.entries(fair.group_gpu_hours).map(([g, h]) => g + ' ' + h.toFixed(2)).join(', ') : '';
    mine.replaceChildren(
      el('p', {}, a.user + ' is ' + a.role + (a.groups.length ? ', groups ' + a.groups.join(', ') : '') +
         '. Now: ' + a.use.running_jobs + ' running, ' + a.use.pending_jobs + ' pending, ' + a.use.gpus + ' GPUs held.'),
      el('p', {}, fair
        ? 'Fair share: decayed usage ' + fair.user_gpu_hours.toFixed(2) + ' GPU-hours (half-life ' +
          duration(fair.half_life_seconds) + ')' + (groupsUse ? '; groups: ' + groupsUse : '') + '.'
        : 'Fair share: not available.'),
      table('Your quotas', ['Subject', 'Name', 'Limits', 'GPUs held', 'GPU-hours this period'],
        a.quotas.map((q) => el('tr', {}, el('td', {}, q.subject), el('td', {}, q.name), el('td', {}, quotaText(q.limits)),
          el('td', {}, q.used.gpus), el('td', {}, Number(q.used.gpu_hours).toFixed(2))))));
  }

  async function renderAdmin() {
    if (!isAdmin()) {
      admin.replaceChildren();
      return;
    }
    try {
      const [users, quotas] = await Promise.all([api('GET', '/v1/users'), api('GET', '/v1/quotas')]);
      admin.replaceChildren(
        table('Users', ['User', 'Uid', 'Role', 'Groups', 'Quota'],
          users.users.map((u) => el('tr', {}, el('th', { scope: 'row' }, u.name), el('td', {}, String(u.uid)),
            el('td', {}, u.role), el('td', {}, u.groups.join(', ')), el('td', {}, u.quota ? quotaText(u.quota) : '')))),
        table('Quotas', ['Subject', 'Name', 'Limits'],
          quotas.quotas.map((q) => el('tr', {}, el('td', {}, q.subject), el('td', {}, q.name), el('td', {}, quotaText(q.limits))))));
    } catch (err) { report(err, 'Reading users and quotas'); }
  }

  on('account', () => { if (visible) renderMine(); });
  return { id: 'account', el: root, show() { visible = true; renderMine(); renderAdmin(); }, hide() { visible = false; } };
}

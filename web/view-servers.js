// The servers: state, reason, GPUs, last heard from; admins drain (with a reason) and resume.
import { api } from './api.js';
import { ago, el } from './format.js';
import { data, isAdmin, loadGpus, loadNodes, on } from './pool.js';
import { act, showError } from './ui.js';

export function create() {
  const body = el('tbody');
  const root = el('section', { id: 'view-servers', class: 'view', 'aria-labelledby': 'nodes-title' },
    el('h2', { id: 'nodes-title' }, 'Servers'),
    el('table', { id: 'nodes', class: 'table' },
      el('thead', {}, el('tr', {}, ['Node', 'State', 'Reason', 'GPUs', 'Last seen'].map(
        (h) => el('th', { scope: 'col' }, h)), el('th', { scope: 'col' }, el('span', { class: 'sr-only' }, 'Actions')))),
      body));
  const reasons = {};  // node -> what the admin typed, kept across redraws
  let visible = false;

  function drain(name, button) {
    const reason = (reasons[name] || '').trim();
    if (!reason) {
      showError('Draining ' + name + ': give a reason first (it is shown to everyone).');
      return;
    }
    act(button, 'Draining ' + name, async () => {
      await api('POST', '/v1/nodes/' + encodeURIComponent(name) + '/drain', { reason });
      delete reasons[name];
      await Promise.all([loadNodes(), loadGpus(name)]);
    });
  }

  function resume(name, button) {
    act(button, 'Resuming ' + name, async () => {
      await api('POST', '/v1/nodes/' + encodeURIComponent(name) + '/resume', {});
      await Promise.all([loadNodes(), loadGpus(name)]);
    });
  }

  function render() {
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.reasonFor : undefined;
    const rows = data.nodes.map((n) => {
      const drained = n.state === 'DRAINING' || n.state === 'DRAINED';
      let actions = null;
      if (isAdmin()) {
        if (drained) {
          actions = el('button', { type: 'button', class: 'resume', dataset: { node: n.name },
                                   onclick: (e) => resume(n.name, e.currentTarget) }, 'Resume ' + n.name);
        } else {
          const input = el('input', { type: 'text', class: 'reason', placeholder: 'reason',
                                      'aria-label': 'Reason for draining ' + n.name, dataset: { reasonFor: n.name } });
          input.value = reasons[n.name] || '';
          input.addEventListener('input', () => { reasons[n.name] = input.value; });
          actions = el('span', {}, input, ' ',
            el('button', { type: 'button', class: 'drain', dataset: { node: n.name },
                           onclick: (e) => drain(n.name, e.currentTarget) }, 'Drain ' + n.name));
        }
      }
      return el('tr', { dataset: { node: n.name, state: n.state } },
        el('th', { scope: 'row' }, n.name), el('td', { class: 'state' }, n.state),
        // The drain/down reason, then what the agent found wrong with the server itself.
        el('td', {}, [n.state_reason, n.health_reason].filter(Boolean).join('; ')),
        el('td', {}, String((n.gpus || []).length)), el('td', {}, ago(n.last_seen_us)), el('td', {}, actions));
    });
    body.replaceChildren(...rows);
    if (focused) {
      const again = body.querySelector('input[data-reason-for="' + CSS.escape(focused) + '"]');
      if (again) again.focus();
    }
  }

  on('nodes', () => { if (visible) render(); });
  on('account', () => { if (visible) render(); });
  return { id: 'servers', el: root, show() { visible = true; render(); }, hide() { visible = false; } };
}

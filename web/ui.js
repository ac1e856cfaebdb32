// What every view shares: the error box, reporting a failed call, buttons that run an action,
// and links between views (the address's fragment: #/jobs, #/job/42, ...).
import { ApiError } from './api.js';
import { el } from './format.js';

let onRefused = () => {};

// `fn(message)` runs when the API refuses the token (401): the page goes back to sign-in.
export function setRefusedHandler(fn) { onRefused = fn; }

export function showError(message) {
  const box = document.getElementById('error');
  box.textContent = message;
  box.hidden = !message;
}

// Reports a failed call. A 401 means the token is wrong or revoked: back to the sign-in form.
export function report(err, what) {
  if (err instanceof ApiError && err.status === 401) {
    onRefused('The API token was refused (' + err.message + '). Enter a valid token.');
    return;
  }
  showError(what + ': ' + err.message);
}

// Runs an action from a button: disabled while it runs, errors shown with `what`.
export async function act(button, what, fn) {
  if (button) button.disabled = true;
  try {
    await fn();
    showError('');
  } catch (err) {
    report(err, what);
  } finally {
    if (button) button.disabled = false;
  }
}

export function jobLink(id, text) {
  return el('a', { href: '#/job/' + id, class: 'job-link', dataset: { job: id } }, text || String(id));
}

// A table with a caption, header cells and rows ('none' when empty).
export function table(caption, headers, rows, attrs = {}) {
  return el('table', Object.assign({ class: 'table' }, attrs), caption ? el('caption', {}, caption) : null,
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: headers.length }, 'none'))));
}

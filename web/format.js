// Formatting shared by the views, matching the CLI's conventions.

// Seconds as Slurm's [days-]hh:mm:ss.
export function duration(seconds) {
  let s = Math.max(0, Math.floor(seconds));
  const days = Math.floor(s / 86400);
  s -= days * 86400;
  const hh = String(Math.floor(s / 3600)).padStart(2, '0');
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, '0');
  const ss = String(s % 60).padStart(2, '0');
  return (days > 0 ? days + '-' : '') + hh + ':' + mm + ':' + ss;
}

// MiB as a short size: "512M", "40.0G".
export function mib(value) {
  if (value === undefined || value === null) return '?';
  return value >= 1024 ? (value / 1024).toFixed(1) + 'G' : value + 'M';
}

// Thousandths of a GPU as a count: 250 -> "0.25", 2000 -> "2".
export function milli(value) {
  return String(Math.round(value) / 1000);
}

// Slurm's short state codes, as `gpool queue` prints them.
const CODES = {
  PENDING: 'PD', RUNNING: 'R', COMPLETING: 'CG', COMPLETED: 'CD', FAILED: 'F', CANCELLED: 'CA',
  TIMEOUT: 'TO', PREEMPTED: 'PR', NODE_FAIL: 'NF', OUT_OF_MEMORY: 'OOM',
};
export function stateCode(state) { return CODES[state] || state; }

// Builds an element: el('td', {class: 'x', dataset: {id: 1}, style: {width: '5%'}}, 'text', ...). Text is
// always set as text, never parsed as HTML.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'dataset') Object.assign(node.dataset, value);
    // Through the CSSOM: the page's Content-Security-Policy refuses inline style attributes.
    else if (key === 'style') Object.assign(node.style, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'text') node.textContent = value;
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Microseconds since the epoch as a local date and time ("2026-12-07 14:03:22"); '' for none.
export function dateTime(us) {
  if (!us) return '';
  const d = new Date(us / 1000);
  const p = (n) => String(n).padStart(2, '0');
  return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' +
         p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
}

// How long ago a time in microseconds was, as [days-]hh:mm:ss.
export function ago(us) {
  return us ? duration((Date.now() * 1000 - us) / 1e6) + ' ago' : '';
}

// A number with thousands separators: 1000 -> "1,000".
export function count(n) { return Number(n).toLocaleString('en-US'); }

// "1 point", "3 points": a count with its noun.
export function plural(n, noun) { return count(n) + ' ' + noun + (n === 1 ? '' : 's'); }

// The gpool dashboard's shell: sign-in with an API token, the live socket and its indicator, and
// the views, one module each, shown one at a time by the address's fragment:
//   #/pool (default)  the summary and every GPU in a compact grid      view-pool.js
//   #/jobs            the queue                                         view-jobs.js
//   #/job/ID          one job: timeline, allocation, use, log tail      view-job.js
//   #/servers         servers with drain and resume                     view-servers.js
//   #/alerts          alerts with acknowledge                           view-alerts.js
//   #/history         the pool over time, per user and group; one GPU   view-history.js
//   #/account         account, quotas, fair share                       view-account.js
// Data lives in pool.js, which applies the watch's messages as they come; views redraw only
// what changed, and only while shown. Plain ES modules, no build step (docs/dashboard.md).
import { adoptTokenFromFragment, api, clearToken, getToken, setToken, watch } from './api.js';
import { el } from './format.js';
import * as pool from './pool.js';
import { report, setRefusedHandler, showError } from './ui.js';
import * as accountView from './view-account.js';
import * as alertsView from './view-alerts.js';
import * as historyView from './view-history.js';
import * as jobView from './view-job.js';
import * as jobsView from './view-jobs.js';
import * as poolView from './view-pool.js';
import * as serversView from './view-servers.js';

const $ = (id) => document.getElementById(id);

const NAV = [['pool', 'Pool'], ['jobs', 'Queue'], ['servers', 'Servers'], ['alerts', 'Alerts'],
  ['history', 'History'], ['account', 'Account']];

const session = { stopWatch: null, timers: [], views: null, current: null, currentName: '' };

function makeViews() {
  const views = {};
  for (const m of [poolView, jobsView, jobView, serversView, alertsView, historyView, accountView]) {
    const v = m.create();
    v.el.hidden = true;
    views[v.id] = v;
    $('views').append(v.el);
  }
  return views;
}

// Shows the view the fragment names (#/job/42 -> view 'job' with params ['42']).
function route() {
  if (!session.views) return;
  const parts = window.location.hash.replace(/^#\/?/, '').split('/').filter(Boolean);
  const name = session.views[parts[0]] ? parts[0] : 'pool';
  const view = session.views[name];
  if (session.current && session.current !== view) {
    session.current.hide();
    session.current.el.hidden = true;
  }
  session.current = view;
  view.el.hidden = false;
  view.show(parts.slice(1));
  session.currentName = name;
  markNav();
  document.title = 'gpool: ' + (name === 'job' ? 'job ' + parts[1] : name);
}

function renderNav() {
  const firing = [...pool.data.alerts.values()].filter((a) => a.state === 'firing').length;
  $('nav').replaceChildren(...NAV.map(([id, title]) => el('a', { href: '#/' + id, dataset: { view: id } },
    title, id === 'alerts' && firing ? el('span', { class: 'badge', id: 'alerts-badge' }, String(firing)) : null)));
  markNav();
}

function markNav() {
  const name = session.currentName;
  for (const a of $('nav').querySelectorAll('a')) {
    const on = a.dataset.view === name || (name === 'job' && a.dataset.view === 'jobs');
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

// ---------------------------------------------------------------- live indicator

function setLive(state, detail) {
  const live = $('live');
  live.dataset.state = state;
  live.classList.toggle('on', state === 'live');
  if (state === 'live') live.textContent = 'live';
  else if (state === 'connecting') live.textContent = detail > 1 ? 'reconnecting…' : 'connecting…';
  else if (state === 'down') live.textContent = 'offline: polling every 5 s, next try in ' + detail + ' s';
  else live.textContent = 'not connected';
}

// ---------------------------------------------------------------- sign-in

function stopSession() {
  if (session.stopWatch) session.stopWatch();
  session.stopWatch = null;
  session.timers.forEach(clearInterval);
  session.timers = [];
}

function signOut(message) {
  clearToken();
  stopSession();
  $('main').hidden = true;
  $('logout').hidden = true;
  $('nav').hidden = true;
  $('login').hidden = false;
  $('who').textContent = '';
  setLive('off');
  showError(message || '');
}

async function refreshAll() {
  const tries = [[pool.loadSummary, 'Reading the summary'], [pool.loadGpus, 'Reading the GPUs'],
    [pool.loadNodes, 'Reading the servers'], [pool.loadJobs, 'Reading the queue'],
    [pool.loadAccount, 'Reading the account'], [pool.loadAlerts, 'Reading the alerts']];
  await Promise.all(tries.map(([fn, what]) => fn().catch((err) => report(err, what))));
}

async function signIn() {
  showError('');
  stopSession();
  try {
    pool.data.account = await api('GET', '/v1/account');
  } catch (err) {
    if (err.status === 401) {
      signOut('The API token was refused (' + err.message + '). Enter a valid token.');
    } else {
      $('login').hidden = false;
      showError('Cannot sign in: ' + err.message);
    }
    return;
  }
  const a = pool.data.account;
  $('login').hidden = true;
  $('main').hidden = false;
  $('nav').hidden = false;
  $('logout').hidden = false;
  $('who').textContent = a.user + ' (' + a.role + ')';
  if (!session.views) {
    session.views = makeViews();
    pool.on('alerts', renderNav);
  }
  renderNav();
  route();
  await refreshAll();
  session.stopWatch = watch({
    onMessage: (topic, d) => {
      if (topic === 'summary') pool.applySummary(d);
      else if (topic === 'jobs') pool.applyJobEvent(d);
      else if (topic === 'nodes') pool.applyNodeChange(d);
      else if (topic === 'alerts') pool.applyAlert(d);
    },
    onState: setLive,
    onPoll: refreshAll,
  });
  // Utilisation and memory change without events: re-read the GPUs regularly; only the tiles
  // whose values changed are redrawn.
  session.timers.push(setInterval(() => pool.loadGpus().catch((err) => report(err, 'Reading the GPUs')), 5000));
}

function start() {
  setRefusedHandler(signOut);
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
  window.addEventListener('hashchange', () => {
    // A new #token=... on an open page (a second `gpool up` link pasted into the same tab).
    if (new URLSearchParams(window.location.hash.slice(1)).has('token')) {
      adoptTokenFromFragment();
      signIn();
      return;
    }
    route();
  });
  if (getToken()) signIn();
  else signOut('');
}

// For the benchmark (bench/dashboard_bench): the data layer and the views.
window.gpoolDashboard = { pool, session };

start();

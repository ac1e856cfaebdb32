// The dashboard's only way to the pool: the public REST API (/v1/..., docs/openapi.json) with a
// bearer API token, and the /v1/watch WebSocket for live updates.

const TOKEN_KEY = 'gpool.token';

// Takes a token handed over in the URL fragment (`gpool up` prints .../#token=...), keeps it
// for this browser tab only (sessionStorage) and removes it from the address bar and history.
export function adoptTokenFromFragment() {
  const params = new URLSearchParams(window.location.hash.slice(1));
  const token = params.get('token');
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, '', window.location.pathname + window.location.search);
  }
}

export function getToken() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(token) { sessionStorage.setItem(TOKEN_KEY, token); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); }

// An error answered by the API: `status` (HTTP) and the body's error code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Calls the API; resolves to the parsed JSON body, rejects with an ApiError naming what the
// server said (its {"error": {"code", "message"}} body) or that it could not be reached.
export async function api(method, path, body) {
  const headers = { 'Authorization': 'Bearer ' + (getToken() || '') };
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'cannot reach gpoold: ' + e.message);
  }
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  if (!response.ok) {
    const err = json && json.error ? json.error : {};
    throw new ApiError(response.status, err.code || 'http_' + response.status,
                       err.message || text || response.statusText);
  }
  return json;
}

// Live updates: opens /v1/watch (the token as `access_token`, since a browser's WebSocket cannot
// send an Authorization header) and calls onMessage(topic, data) for each update.
//
// onState(state, detail) tells the truth about the socket, for the page's live indicator:
//   'connecting'  a socket is being opened (detail: the attempt number, 1 for the first);
//   'live'        gpoold confirmed the subscription ({"subscribed": ...}): updates flow;
//   'down'        the socket closed or could not open (detail: seconds until the next try);
//                 onPoll() then runs every pollMs until the socket is live again.
// A socket that opens but never confirms its subscription is not called live. Each time the
// socket becomes live onPoll() runs once, to catch up with what changed while it was down.
// Returns a function that stops everything.
export function watch({ onMessage, onState, onPoll, pollMs = 5000,
                        topics = 'alerts,jobs,nodes,summary' }) {
  let socket = null;
  let pollTimer = null;
  let retryTimer = null;
  let retryMs = 1000;
  let attempt = 0;
  let stopped = false;

  const startPolling = () => {
    if (pollTimer === null) pollTimer = setInterval(onPoll, pollMs);
  };
  const stopPolling = () => {
    if (pollTimer !== null) clearInterval(pollTimer);
    pollTimer = null;
  };

  const connect = () => {
    if (stopped) return;
    attempt += 1;
    onState('connecting', attempt);
    const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
    const url = scheme + '//' + window.location.host + '/v1/watch?topics=' + topics +
                '&access_token=' + encodeURIComponent(getToken() || '');
    let live = false;
    try {
      socket = new WebSocket(url);
    } catch (e) {
      socket = null;
      retry();
      return;
    }
    socket.onmessage = (event) => {
      let msg;
      try { msg = JSON.parse(event.data); } catch (e) { return; }
      if (msg.topic) {
        onMessage(msg.topic, msg.data);
      } else if (msg.subscribed && !live) {
        live = true;
        retryMs = 1000;
        attempt = 0;
        stopPolling();
        onState('live');
        onPoll();  // catch up with whatever changed while the socket was down
      }
    };
    socket.onclose = () => {
      socket = null;
      retry();
    };
  };

  const retry = () => {
    if (stopped) return;
    startPolling();
    onState('down', Math.round(retryMs / 1000));
    retryTimer = setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 30000);
  };

  connect();
  return () => {
    stopped = true;
    stopPolling();
    clearTimeout(retryTimer);
    if (socket) {
      socket.onclose = null;
      socket.close();
    }
  };
}

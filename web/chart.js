// A small hand-drawn time chart on a <canvas>: several series against time, with a grid, a y
// axis and a few time labels. No chart library (docs/dashboard.md says why).

// series: [{label, color, points: [{t: ms since epoch, v}], dash: bool}]
// options: yMax (default 100, or 'auto': the largest value, at least 1), yFormat (a tick's
// label; default v + '%'), emptyText, minSpanMs (the narrowest time span drawn).
export function drawChart(canvas, series, options = {}) {
  const { emptyText = 'no samples yet', yFormat = (v) => v + '%', minSpanMs = 60000 } = options;
  // Draw at the screen's pixel density so that lines and text stay sharp.
  const ratio = window.devicePixelRatio || 1;
  const cssW = canvas.clientWidth || canvas.width;
  const cssH = canvas.clientHeight || canvas.height;
  if (canvas.width !== Math.round(cssW * ratio)) canvas.width = Math.round(cssW * ratio);
  if (canvas.height !== Math.round(cssH * ratio)) canvas.height = Math.round(cssH * ratio);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  const w = cssW;
  const h = cssH;
  const left = 52, right = 12, top = 12, bottom = 28;
  const plotW = w - left - right;
  const plotH = h - top - bottom;
  ctx.clearRect(0, 0, w, h);
  ctx.font = '12px system-ui, sans-serif';
  ctx.fillStyle = '#5f6570';
  ctx.strokeStyle = '#d9dce1';
  ctx.lineWidth = 1;

  const all = series.flatMap((s) => s.points);
  let yMax = options.yMax === undefined ? 100 : options.yMax;
  if (yMax === 'auto') yMax = niceCeil(Math.max(1, ...all.map((p) => p.v)));

  // Horizontal grid and the y axis labels.
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let i = 0; i <= 4; i += 1) {
    const v = (yMax * i) / 4;
    const y = top + plotH - (i / 4) * plotH;
    ctx.beginPath();
    ctx.moveTo(left, y);
    ctx.lineTo(left + plotW, y);
    ctx.stroke();
    ctx.fillText(yFormat(Math.round(v * 100) / 100), left - 6, y);
  }

  if (all.length === 0) {
    ctx.textAlign = 'center';
    ctx.fillText(emptyText, left + plotW / 2, top + plotH / 2);
    return;
  }
  let t0 = Math.min(...all.map((p) => p.t));
  const t1 = Math.max(...all.map((p) => p.t));
  if (t1 - t0 < minSpanMs) t0 = t1 - minSpanMs;
  const x = (t) => left + ((t - t0) / (t1 - t0)) * plotW;
  const y = (v) => top + plotH - (Math.max(0, Math.min(yMax, v)) / yMax) * plotH;

  // Time labels: start, middle, end (with the day when the span is longer than one).
  ctx.textBaseline = 'top';
  ctx.textAlign = 'center';
  const long = t1 - t0 > 86400000;
  for (const frac of [0, 0.5, 1]) {
    const t = t0 + frac * (t1 - t0);
    const d = new Date(t);
    const label = (long ? d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' : '') +
                  d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    ctx.fillText(label, Math.min(Math.max(x(t), left + 30), left + plotW - 30), top + plotH + 8);
  }

  for (const s of series) {
    if (s.points.length === 0) continue;
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 2;
    ctx.setLineDash(s.dash ? [6, 4] : []);
    ctx.beginPath();
    s.points.forEach((p, i) => (i === 0 ? ctx.moveTo(x(p.t), y(p.v)) : ctx.lineTo(x(p.t), y(p.v))));
    ctx.stroke();
    if (s.points.length === 1) {  // a lone sample is a dot, not an invisible line
      ctx.fillStyle = s.color;
      ctx.fillRect(x(s.points[0].t) - 2, y(s.points[0].v) - 2, 4, 4);
    }
  }
  ctx.setLineDash([]);
}

// 1, 2, 5 x 10^n at or above v.
function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

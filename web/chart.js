// A small hand-drawn time chart on a <canvas>: several series of percentages (0..100) against
// time, with a grid, a y axis in % and a few time labels. No chart library.

// series: [{label, color, points: [{t: ms since epoch, v: 0..100}]}]
export function drawChart(canvas, series, { emptyText = 'no samples yet' } = {}) {
  const ctx = canvas.getContext('2d');
  const w = canvas.width;
  const h = canvas.height;
  const left = 44, right = 12, top = 12, bottom = 28;
  const plotW = w - left - right;
  const plotH = h - top - bottom;
  ctx.clearRect(0, 0, w, h);
  ctx.font = '12px system-ui, sans-serif';
  ctx.fillStyle = '#5f6570';
  ctx.strokeStyle = '#d9dce1';
  ctx.lineWidth = 1;

  // Horizontal grid and the y axis labels.
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let pct = 0; pct <= 100; pct += 25) {
    const y = top + plotH - (pct / 100) * plotH;
    ctx.beginPath();
    ctx.moveTo(left, y);
    ctx.lineTo(left + plotW, y);
    ctx.stroke();
    ctx.fillText(pct + '%', left - 6, y);
  }

  const all = series.flatMap((s) => s.points);
  if (all.length === 0) {
    ctx.textAlign = 'center';
    ctx.fillText(emptyText, left + plotW / 2, top + plotH / 2);
    return;
  }
  let t0 = Math.min(...all.map((p) => p.t));
  let t1 = Math.max(...all.map((p) => p.t));
  if (t1 - t0 < 60000) t0 = t1 - 60000;  // at least one minute wide
  const x = (t) => left + ((t - t0) / (t1 - t0)) * plotW;
  const y = (v) => top + plotH - (Math.max(0, Math.min(100, v)) / 100) * plotH;

  // Time labels: start, middle, end.
  ctx.textBaseline = 'top';
  ctx.textAlign = 'center';
  for (const frac of [0, 0.5, 1]) {
    const t = t0 + frac * (t1 - t0);
    const label = new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    ctx.fillText(label, Math.min(Math.max(x(t), left + 20), left + plotW - 20), top + plotH + 8);
  }

  for (const s of series) {
    if (s.points.length === 0) continue;
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    s.points.forEach((p, i) => (i === 0 ? ctx.moveTo(x(p.t), y(p.v)) : ctx.lineTo(x(p.t), y(p.v))));
    ctx.stroke();
    if (s.points.length === 1) {  // a lone sample is a dot, not an invisible line
      ctx.fillStyle = s.color;
      ctx.fillRect(x(s.points[0].t) - 2, y(s.points[0].v) - 2, 4, 4);
    }
  }
}

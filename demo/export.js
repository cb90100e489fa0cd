// export.js - saves the current view as SVG or PNG (with a caption saying what it shows) and the view as JSON, all in the browser.

import { FONT, wrapWidth } from './render.js';

const NS = 'http://www.w3.org/2000/svg';

// One standalone SVG holding every visible <svg> inside container, placed
// where it sits on screen, so a grid of heads or the rule comparison exports
// as one picture. HTML labels that belong to the picture (headings and row
// and column names around a grid of thumbnails) carry data-export-text and
// are drawn as SVG text in their place. Returns {svg: string, width, height}.
export function composeSVG(container, caption = '') {
  const shown = e => e.getClientRects().length > 0 && !e.closest('[hidden]');
  const svgs = [...container.querySelectorAll('svg')].filter(shown);
  if (svgs.length === 0) throw new Error('nothing to export in this view');
  const texts = [...container.querySelectorAll('[data-export-text]')].filter(e => shown(e) && e.textContent.trim());
  const place = (e, w, h) => {
    const r = e.getBoundingClientRect();
    return { e, ...unscrolled(e, container), w: w ?? r.width, h: h ?? r.height, dx: 0, dy: 0 };
  };
  // SVGs at their intrinsic size, not the on-screen one (a phone may shrink them).
  const placed = [...svgs.map(s => place(s, Number(s.getAttribute('width')) || undefined, Number(s.getAttribute('height')) || undefined)),
    ...texts.map(t => place(t))];
  makeRoom(placed, container);
  let minX = Infinity, minY = Infinity, maxX = 0, maxY = 0;
  for (const p of placed) {
    p.x += p.dx; p.y += p.dy;
    minX = Math.min(minX, p.x); minY = Math.min(minY, p.y);
    maxX = Math.max(maxX, p.x + p.w); maxY = Math.max(maxY, p.y + p.h);
  }
  const pad = 8;
  const capH = caption ? 22 : 0;
  const width = Math.ceil(Math.max(maxX - minX + 2 * pad, caption ? caption.length * 6.2 + 2 * pad : 0));
  const height = Math.ceil(maxY - minY + 2 * pad + capH);
  const out = document.createElementNS(NS, 'svg');
  out.setAttribute('xmlns', NS);
  out.setAttribute('width', width);
  out.setAttribute('height', height);
  out.setAttribute('viewBox', `0 0 ${width} ${height}`);
  out.setAttribute('font-family', FONT);
  const bg = document.createElementNS(NS, 'rect');
  bg.setAttribute('width', width); bg.setAttribute('height', height); bg.setAttribute('fill', '#ffffff');
  out.append(bg);
  if (caption) {
    const t = document.createElementNS(NS, 'text');
    t.setAttribute('x', pad); t.setAttribute('y', pad + 11);
    t.setAttribute('font-size', 11); t.setAttribute('fill', '#5b6475');
    t.setAttribute('class', 'export-caption');
    t.textContent = caption;
    out.append(t);
  }
  for (const p of placed) {
    const X = p.x - minX + pad, Y = p.y - minY + pad + capH;
    if (p.e instanceof SVGSVGElement) {
      const c = p.e.cloneNode(true);
      c.setAttribute('x', X.toFixed(1));
      c.setAttribute('y', Y.toFixed(1));
      c.setAttribute('width', p.w);
      c.setAttribute('height', p.h);
      c.removeAttribute('style');
      // Sticky labels of a scrolled heatmap go back to their place.
      for (const g of c.querySelectorAll('.row-band, .col-band, .corner, .axes')) g.removeAttribute('transform');
      for (const g of c.querySelectorAll('.corner')) g.setAttribute('visibility', 'hidden');
      // Lines hidden by a hover stay hidden: the export is what the user sees.
      out.append(c);
    } else {
      out.append(htmlText(p.e, X, Y, p.w));
    }
  }
  return { svg: new XMLSerializer().serializeToString(out), width, height };
}

// A figure wider or taller than the box it scrolls in exports whole, so the
// parts beside it (right of the box, level with it) or under it move out of
// its way by as much as it overflows, instead of being drawn over it.
function makeRoom(placed, container) {
  for (const p of placed) {
    for (let a = p.e.parentElement; a && a !== container; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
      const clip = unscrolled(a, container);
      const right = clip.x + a.clientLeft + a.clientWidth, bottom = clip.y + a.clientTop + a.clientHeight;
      const ox = p.x + p.w - right, oy = p.y + p.h - bottom;
      for (const q of placed) {
        if (q === p || a.contains(q.e)) continue;
        if (ox > 0.5 && q.x >= right - 1 && q.y < p.y + p.h && p.y < q.y + q.h) q.dx = Math.max(q.dx, ox);
        if (oy > 0.5 && q.y >= bottom - 1 && q.x < p.x + p.w && p.x < q.x + q.w) q.dy = Math.max(q.dy, oy);
      }
    }
  }
}
// Where e sits in container as if nothing inside it were scrolled: a
// scrolled figure exports whole, in its place.
function unscrolled(e, container) {
  const r = e.getBoundingClientRect(), b = container.getBoundingClientRect();
  let x = r.left - b.left, y = r.top - b.top;
  for (let a = e.parentElement; a && a !== container; a = a.parentElement) { x += a.scrollLeft; y += a.scrollTop; }
  return { x, y };
}

// An HTML label as SVG text at (x, y), in its computed font and colour, its
// lines broken as they fit its box (w px).
function htmlText(e, x, y, w) {
  const cs = getComputedStyle(e);
  const px = parseFloat(cs.fontSize) || 12, weight = Number(cs.fontWeight) || 400;
  const lh = parseFloat(cs.lineHeight) || px * 1.2;
  const lines = wrapWidth(e.textContent.trim(), Math.ceil(w) + 1, px, weight);
  const anchor = cs.textAlign === 'center' ? 'middle' : cs.textAlign === 'right' || cs.textAlign === 'end' ? 'end' : 'start';
  const ax = anchor === 'middle' ? x + w / 2 : anchor === 'end' ? x + w : x;
  const t = document.createElementNS(NS, 'text');
  t.setAttribute('class', 'export-label');
  t.setAttribute('font-size', px);
  if (weight !== 400) t.setAttribute('font-weight', weight);
  t.setAttribute('fill', cs.color);
  t.setAttribute('text-anchor', anchor);
  lines.forEach((l, k) => {
    const s = document.createElementNS(NS, 'tspan');
    s.setAttribute('x', ax.toFixed(1));
    // the baseline: the line box's top, half the leading, then the ascent (about 0.8 em)
    s.setAttribute('y', (y + k * lh + (lh - px) / 2 + 0.8 * px).toFixed(1));
    s.textContent = l + (k < lines.length - 1 ? ' ' : '');
    t.append(s);
  });
  return t;
}

// Returns {filename, size} for the page's confirmation.
export function download(blob, filename) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  return { filename, size: blob.size };
}

export function exportSVG(container, filename, caption = '') {
  const { svg } = composeSVG(container, caption);
  return download(new Blob([svg], { type: 'image/svg+xml' }), filename);
}

// PNG: the composed SVG drawn onto a canvas at twice the size, for sharp text.
export async function pngBlob(container, caption = '') {
  const { svg, width, height } = composeSVG(container, caption);
  const img = new Image();
  const url = URL.createObjectURL(new Blob([svg], { type: 'image/svg+xml' }));
  try {
    await new Promise((resolve, reject) => {
      img.onload = resolve;
      img.onerror = () => reject(new Error('the browser could not draw the SVG'));
      img.src = url;
    });
    const scale = 2;
    const canvas = document.createElement('canvas');
    canvas.width = width * scale;
    canvas.height = height * scale;
    const ctx = canvas.getContext('2d');
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
    const blob = await new Promise(r => canvas.toBlob(r, 'image/png'));
    if (!blob) throw new Error('PNG encoding failed');
    return blob;
  } finally {
    URL.revokeObjectURL(url);
  }
}

export async function exportPNG(container, filename, caption = '') {
  return download(await pngBlob(container, caption), filename);
}

export function exportJSON(obj, filename) {
  return download(new Blob([JSON.stringify(obj, null, 2) + '\n'], { type: 'application/json' }), filename);
}

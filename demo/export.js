// export.js - saves the current view as SVG or PNG (with a caption saying what it shows) and the view as JSON, all in the browser.

const NS = 'http://www.w3.org/2000/svg';

// One standalone SVG holding every visible <svg> inside container, placed
// where it sits on screen, so a grid of heads or the rule comparison exports
// as one picture. Returns {svg: string, width, height}.
export function composeSVG(container, caption = '') {
  const parts = [...container.querySelectorAll('svg')].filter(s => s.getClientRects().length > 0 && !s.closest('[hidden]'));
  if (parts.length === 0) throw new Error('nothing to export in this view');
  const box = container.getBoundingClientRect();
  let minX = Infinity, minY = Infinity, maxX = 0, maxY = 0;
  const placed = parts.map(s => {
    const r = s.getBoundingClientRect();
    // Where it sits unscrolled: a scrolled figure exports whole, in its place.
    let x = r.left - box.left, y = r.top - box.top;
    for (let a = s.parentElement; a && a !== container; a = a.parentElement) { x += a.scrollLeft; y += a.scrollTop; }
    // The intrinsic size, not the on-screen one (a phone may shrink it).
    const w = Number(s.getAttribute('width')) || r.width, h = Number(s.getAttribute('height')) || r.height;
    minX = Math.min(minX, x); minY = Math.min(minY, y);
    maxX = Math.max(maxX, x + w); maxY = Math.max(maxY, y + h);
    return { s, x, y, w, h };
  });
  const pad = 8;
  const capH = caption ? 22 : 0;
  const width = Math.ceil(Math.max(maxX - minX + 2 * pad, caption ? caption.length * 6.2 + 2 * pad : 0));
  const height = Math.ceil(maxY - minY + 2 * pad + capH);
  const out = document.createElementNS(NS, 'svg');
  out.setAttribute('xmlns', NS);
  out.setAttribute('width', width);
  out.setAttribute('height', height);
  out.setAttribute('viewBox', `0 0 ${width} ${height}`);
  const bg = document.createElementNS(NS, 'rect');
  bg.setAttribute('width', width); bg.setAttribute('height', height); bg.setAttribute('fill', '#ffffff');
  out.append(bg);
  if (caption) {
    const t = document.createElementNS(NS, 'text');
    t.setAttribute('x', pad); t.setAttribute('y', pad + 11);
    t.setAttribute('font-size', 11); t.setAttribute('fill', '#5b6475');
    t.setAttribute('font-family', 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif');
    t.setAttribute('class', 'export-caption');
    t.textContent = caption;
    out.append(t);
  }
  for (const p of placed) {
    const c = p.s.cloneNode(true);
    c.setAttribute('x', (p.x - minX + pad).toFixed(1));
    c.setAttribute('y', (p.y - minY + pad + capH).toFixed(1));
    c.setAttribute('width', p.w);
    c.setAttribute('height', p.h);
    c.removeAttribute('style');
    // Sticky labels of a scrolled heatmap go back to their place.
    for (const g of c.querySelectorAll('.row-band, .col-band, .corner, .axes')) g.removeAttribute('transform');
    for (const g of c.querySelectorAll('.corner')) g.setAttribute('visibility', 'hidden');
    // Lines hidden by a hover stay hidden: the export is what the user sees.
    out.append(c);
  }
  return { svg: new XMLSerializer().serializeToString(out), width, height };
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

// export.js - saves the current view as SVG or PNG and the API response as JSON, all in the browser.

const NS = 'http://www.w3.org/2000/svg';

// One standalone SVG holding every visible <svg> inside container, placed
// where it sits on screen, so a grid of heads or the rule comparison exports
// as one picture. Returns {svg: string, width, height}.
export function composeSVG(container) {
  const parts = [...container.querySelectorAll('svg')].filter(s => s.getClientRects().length > 0);
  if (parts.length === 0) throw new Error('nothing to export in this view');
  const box = container.getBoundingClientRect();
  let minX = Infinity, minY = Infinity, maxX = 0, maxY = 0;
  const placed = parts.map(s => {
    const r = s.getBoundingClientRect();
    const x = r.left - box.left, y = r.top - box.top;
    minX = Math.min(minX, x); minY = Math.min(minY, y);
    maxX = Math.max(maxX, x + r.width); maxY = Math.max(maxY, y + r.height);
    return { s, x, y, w: r.width, h: r.height };
  });
  const pad = 8;
  const width = Math.ceil(maxX - minX + 2 * pad), height = Math.ceil(maxY - minY + 2 * pad);
  const out = document.createElementNS(NS, 'svg');
  out.setAttribute('xmlns', NS);
  out.setAttribute('width', width);
  out.setAttribute('height', height);
  out.setAttribute('viewBox', `0 0 ${width} ${height}`);
  const bg = document.createElementNS(NS, 'rect');
  bg.setAttribute('width', width); bg.setAttribute('height', height); bg.setAttribute('fill', '#ffffff');
  out.append(bg);
  for (const p of placed) {
    const c = p.s.cloneNode(true);
    c.setAttribute('x', (p.x - minX + pad).toFixed(1));
    c.setAttribute('y', (p.y - minY + pad).toFixed(1));
    c.setAttribute('width', p.w.toFixed(1));
    c.setAttribute('height', p.h.toFixed(1));
    // Lines hidden by a hover stay hidden: the export is what the user sees.
    out.append(c);
  }
  return { svg: new XMLSerializer().serializeToString(out), width, height };
}

export function download(blob, filename) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

export function exportSVG(container, filename) {
  const { svg } = composeSVG(container);
  download(new Blob([svg], { type: 'image/svg+xml' }), filename);
}

// PNG: the composed SVG drawn onto a canvas at twice the size, for sharp text.
export async function exportPNG(container, filename) {
  const { svg, width, height } = composeSVG(container);
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
    download(blob, filename);
  } finally {
    URL.revokeObjectURL(url);
  }
}

export function exportJSON(obj, filename) {
  download(new Blob([JSON.stringify(obj, null, 2) + '\n'], { type: 'application/json' }), filename);
}

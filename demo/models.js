// models.js - the hook for views of trained models; the service does not serve them yet, so this draws nothing fake.
//
// The plan (for whoever builds it): the service will list models at
// GET /models and translate at POST /models/{name}/translate, answering with
// the tokens of both sentences and attention per layer and head (Transformer)
// or per decoder step (GRU seq2seq). A "Model" view then:
//   1. fills a <select> from GET /models;
//   2. posts the sentence, and draws each layer x head with render.js:
//      heatmap(matrix, {rows, cols, scale}) per head, lineView() for the
//      head view, coloredTokens() for attention on the text;
//   3. joins the page's shared state (S.pin, S.scale, the URL hash) as the
//      tensors demo does, so pins and links work the same.
// Until GET /models answers, the tab stays hidden and the page only says
// that trained models are coming.

// Returns the list of model names, or null when the service has none (yet).
export async function probeModels(apiBase, getJSON) {
  const r = await getJSON(apiBase + 'models');
  if (!r.ok || !r.body) return null;
  const list = Array.isArray(r.body) ? r.body : Array.isArray(r.body.models) ? r.body.models : null;
  if (!list || list.length === 0) return null;
  return list.map(m => (typeof m === 'string' ? m : m && (m.name || m.id)) || '?');
}

// Shows the tab and lists what the service offers; the views themselves are
// still to be written (see above), and the panel says so.
export function initModelView({ tab, panel, models }) {
  if (!models) return;
  tab.hidden = false;
  panel.replaceChildren();
  const p = document.createElement('p');
  p.className = 'hint';
  p.textContent = `The service lists ${models.length} trained model(s): ${models.join(', ')}. ` +
    'Their translation and attention views are not built into this page yet.';
  panel.append(p);
}

// embed.js - turns sentences into tokens and tokens into deterministic vectors for the demo.
//
// Why this scheme: the demo has no trained model, yet attention only says
// something when similar tokens get similar vectors. Hashed character n-grams
// (fastText-style subword features, Bojanowski et al. 2017) give exactly that
// without any weights: "cat" and "cats" share "<ca", "cat", "at" ... and so
// point in nearly the same direction. Sinusoidal positions (Vaswani et al.
// 2017) are added with a small weight so that repeated words are told apart
// by where they stand, as in a transformer's input.
//
// For a token t at position p, with D the vector size:
//   1. grams = the character 1-, 2- and 3-grams of "<" + lowercase(t) + ">",
//      plus the whole word "<t>" itself (counted twice so equal words are
//      closer than merely similar ones);
//   2. for each gram g: h = FNV-1a-32(g); add sign(h) to slot h mod D, where
//      sign is +1 when bit 31 of h is 0 and -1 otherwise (the signed "hashing
//      trick", which keeps collisions from always adding up);
//   3. scale that vector to length sqrt(D);
//   4. add posWeight * PE(p), PE(p)[2i] = sin(p / 10000^(2i/D)),
//      PE(p)[2i+1] = cos(p / 10000^(2i/D)).
// Everything is plain integer and float arithmetic, so every browser gives
// the same vectors for the same text.

export const DEFAULT_DIM = 32;
export const DEFAULT_POS_WEIGHT = 0.5;
// The most tokens the page sends per sentence. Longer text is cut here, and
// the page says so next to the sentence (tokenCount gives the full count).
export const MAX_TOKENS = 128;

// Words (letters, digits, apostrophes) and single punctuation marks.
const TOKEN_RE = /[\p{L}\p{N}']+|[^\s\p{L}\p{N}]/gu;

export function tokenize(text) {
  return (String(text).match(TOKEN_RE) || []).slice(0, MAX_TOKENS);
}

export function tokenCount(text) {
  return (String(text).match(TOKEN_RE) || []).length;
}

// FNV-1a over the UTF-16 code units, 32-bit; Math.imul keeps it exact.
export function fnv1a(str) {
  let h = 0x811c9dc5;
  for (let i = 0; i < str.length; i++) {
    h ^= str.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function charGrams(token) {
  const w = '<' + token.toLowerCase() + '>';
  const chars = Array.from(w); // code points, so accented letters stay whole
  const grams = [];
  for (let n = 1; n <= 3; n++) {
    for (let i = 0; i + n <= chars.length; i++) grams.push(chars.slice(i, i + n).join(''));
  }
  grams.push(w, w);
  return grams;
}

export function positionalEncoding(pos, dim) {
  const pe = new Array(dim).fill(0);
  for (let i = 0; 2 * i < dim; i++) {
    const angle = pos / Math.pow(10000, (2 * i) / dim);
    pe[2 * i] = Math.sin(angle);
    if (2 * i + 1 < dim) pe[2 * i + 1] = Math.cos(angle);
  }
  return pe;
}

export function tokenVector(token, pos, dim = DEFAULT_DIM, posWeight = DEFAULT_POS_WEIGHT) {
  const v = new Array(dim).fill(0);
  for (const g of charGrams(token)) {
    const h = fnv1a(g);
    v[h % dim] += (h & 0x80000000) ? -1 : 1;
  }
  const norm = Math.hypot(...v) || 1;
  const target = Math.sqrt(dim);
  const pe = positionalEncoding(pos, dim);
  // Rounded to 6 decimals so the request is short and readable when exported.
  return v.map((x, i) => Math.round((x / norm * target + posWeight * pe[i]) * 1e6) / 1e6);
}

export function embed(tokens, dim = DEFAULT_DIM, posWeight = DEFAULT_POS_WEIGHT) {
  return tokens.map((t, p) => tokenVector(t, p, dim, posWeight));
}

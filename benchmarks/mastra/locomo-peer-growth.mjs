// Memstack's benchmark copy of ../shared/bench/mastra-peer/locomo-peer.mjs (the side-by-side Mastra peer), with
// the same Memory set-up (LibSQL file store + LibSQL vector, the same feature-hashing embedder) and three
// additions, each off by default so that with no extra env it prints what the original prints:
//   GROW=N      before measuring, store N messages (batched: one saveMessages per LoCoMo session) by replaying the
//               file's conversations under resources grow-<k>-<sample_id>, as Memstack's speed benchmark does;
//   RUNS=R      measure the turn loop R times, each on a fresh resource (<sample_id>-run<r>);
//   TOPKS=4,8,16  also answer every question at these topK (recall's threadConfig override), in the first run;
//   SCORES=1    add each question's category, evidence and per-topK score (for per-category tables);
//   ONE=1       a long-lived user: the growth and every run go into ONE resource (`one-<sample_id>`), message
//               and thread ids kept distinct by a per-pass key (grow-<k>, run<r>).
//   SIZES=1000,10000,100000  grow ONE store through these sizes (in place of GROW), measuring at each; the
//               measured runs' messages count as stored (in ONE mode they stay in the grown resource).
//   BUDGET_S=S  stop growing once growth has taken S seconds in all: the size reached is measured (flagged
//               `budget_hit`) and larger sizes are not run.
// Usage: node locomo-peer-growth.mjs <locomo.json | locomo-shaped .json.gz> [conversationIndex=0]
//   env: DB=/path/file.db  DIM=256  TOPK=4  RANGE=1  LAST=10  GROW=0  RUNS=1  TOPKS=<TOPK>  SCORES=0  ONE=0
//        SIZES=<GROW>  BUDGET_S=0 (none)
// Prints one JSON line per size measured (the original's fields, from run 0 and TOPK, plus `runs`, `topks`,
// `stored_before`, `grow_s` — growth up to that size, in all — and `budget_hit`).
import { Memory } from '@mastra/memory';
import { LibSQLStore, LibSQLVector } from '@mastra/libsql';
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

const [file, convArg] = process.argv.slice(2);
const raw = readFileSync(file);
const all = JSON.parse((file.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8'));
const conv = all[Number(convArg ?? 0)];
const DIM = Number(process.env.DIM ?? 256), TOPK = Number(process.env.TOPK ?? 4);
const RANGE = Number(process.env.RANGE ?? 1), LAST = Number(process.env.LAST ?? 10);
const GROW = Number(process.env.GROW ?? 0), RUNS = Number(process.env.RUNS ?? 1);
const TOPKS = (process.env.TOPKS ?? String(TOPK)).split(',').map(Number);
const SCORES = process.env.SCORES === '1', ONE = process.env.ONE === '1';
const SIZES = (process.env.SIZES ?? String(GROW)).split(',').filter(x => x !== '').map(Number).sort((a, b) => a - b);
const BUDGET_MS = Number(process.env.BUDGET_S ?? 0) * 1000;
const DB = process.env.DB ?? join(tmpdir(), 'mastra-locomo-peer.db');
for (const f of [DB, DB + '-wal', DB + '-shm']) rmSync(f, { force: true });

export function hashEmbed(text) {
  const v = new Float64Array(DIM);
  const toks = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const feats = [...toks, ...toks.flatMap(t => { const s = `#${t}#`; const o = []; for (let i = 0; i + 3 <= s.length; i++) o.push('3:' + s.slice(i, i + 3)); return o; })];
  for (const f of feats) {
    const h = createHash('md5').update(f).digest();
    v[h.readUInt32LE(0) % DIM] += ((h[4] & 1) ? 1 : -1) * (f.startsWith('3:') ? 0.5 : 1);
  }
  let n = 0; for (const x of v) n += x * x; n = Math.sqrt(n) || 1;
  return Array.from(v, x => x / n);
}
const embedder = {
  specificationVersion: 'v2', provider: 'local', modelId: `hash-${DIM}`, maxEmbeddingsPerCall: 2048,
  supportsParallelCalls: true,
  async doEmbed({ values }) { return { embeddings: values.map(hashEmbed), usage: { tokens: 0 }, warnings: [] }; },
};
const url = `file:${DB}`;
const memory = new Memory({
  storage: new LibSQLStore({ id: 'peer-store', url }), vector: new LibSQLVector({ id: 'peer-vector', url }), embedder,
  options: { lastMessages: LAST, semanticRecall: { topK: TOPK, messageRange: RANGE, scope: 'resource' }, generateTitle: false },
});

// LoCoMo date "1:56 pm on 8 May, 2023" -> Date (UTC)
const MONTHS = { january: 0, february: 1, march: 2, april: 3, may: 4, june: 5, july: 6, august: 7, september: 8, october: 9, november: 10, december: 11 };
function parseDate(s) {
  const m = s.match(/(\d+):(\d+)\s*(am|pm) on (\d+) (\w+),? (\d+)/i);
  if (!m) return new Date(Date.UTC(2023, 0, 1));
  let h = Number(m[1]) % 12; if (m[3].toLowerCase() === 'pm') h += 12;
  return new Date(Date.UTC(Number(m[6]), MONTHS[m[5].toLowerCase()], Number(m[4]), h, Number(m[2])));
}
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const sessionsOf = c => Object.keys(c).filter(k => /^session_\d+$/.test(k)).sort((a, b) => Number(a.split('_')[1]) - Number(b.split('_')[1]));
function messagesOf(sample, resourceId, s, key = resourceId) {
  const c = sample.conversation, threadId = `${key}-${s}`, t0 = parseDate(c[`${s}_date_time`] ?? '');
  return c[s].map((turn, i) => {
    let text = `${turn.speaker}: ${turn.text}`;
    if (turn.blip_caption) text += ` [shares an image: ${turn.blip_caption}]`;
    return { id: `${key}:${turn.dia_id}`, threadId, resourceId, role: turn.speaker === c.speaker_a ? 'user' : 'assistant',
      type: 'text', createdAt: new Date(t0.getTime() + i * 1000), content: { format: 2, parts: [{ type: 'text', text }] } };
  });
}

// Growth: whole sessions, batched, under fresh resources (or into the one resource), until `size` messages are
// stored or the growth budget is spent; `k` goes on across sizes, so every pass has distinct ids.
let stored = 0, k = 0, growMs = 0, budgetHit = false;
async function growTo(size) {
  const start = performance.now();
  for (; stored < size; k++) {
    if (BUDGET_MS && growMs + performance.now() - start > BUDGET_MS) { budgetHit = true; break; }
    const sample = all[k % all.length], key = `grow-${k}-${sample.sample_id}`;
    const resourceId = ONE ? `one-${conv.sample_id}` : key;
    for (const s of sessionsOf(sample.conversation)) {
      if (stored >= size) break;
      const msgs = messagesOf(sample, resourceId, s, key).slice(0, size - stored);
      await memory.createThread({ resourceId, threadId: msgs[0].threadId, title: '' });
      await memory.saveMessages({ messages: msgs });
      stored += msgs.length;
    }
    if (k % 20 === 0) process.stderr.write(`\rgrowing: ${stored}/${size} messages`);
  }
  growMs += performance.now() - start;
  if (size) process.stderr.write(`\rgrew to ${stored} messages in ${(growMs / 1000).toFixed(1)} s in all\n`);
}

const c = conv.conversation, sessions = sessionsOf(c);
const valid = new Set(sessions.flatMap(s => c[s].map(t => t.dia_id)));
const mean = xs => xs.reduce((a, b) => a + b, 0) / xs.length;
async function measure(tag) {
  const storedBefore = stored;
  const runs = [], topks = {}, scored = [];
  for (let r = 0; r < RUNS; r++) {
    const key = `${conv.sample_id}${tag}` + (RUNS > 1 || ONE ? `-run${r}` : '');
    const resourceId = ONE ? `one-${conv.sample_id}` : key;
    const saveMs = []; let nMsg = 0;
    for (const s of sessions) {
      const msgs = messagesOf(conv, resourceId, s, key);
      await memory.createThread({ resourceId, threadId: msgs[0].threadId, title: '' });
      for (const m of msgs) { const t = performance.now(); await memory.saveMessages({ messages: [m] }); saveMs.push(performance.now() - t); nMsg++; }
    }
    stored += nMsg;
    const queryThread = `${key}-questions`;
    await memory.createThread({ resourceId, threadId: queryThread, title: '' });
    const recallMs = [];
    for (const qa of conv.qa) {
      if (qa.category === 5) continue;
      const ev = (qa.evidence ?? []).filter(e => valid.has(e));
      if (!ev.length) continue;
      const row = { category: qa.category, evidence: ev, scores: {}, returned: {} };
      for (const [i, topK] of (r === 0 ? TOPKS : [TOPK]).entries()) {
        const threadConfig = { semanticRecall: { topK, messageRange: RANGE, scope: 'resource' } };
        const t = performance.now();
        const res = await memory.recall({ threadId: queryThread, resourceId, vectorSearchString: String(qa.question), threadConfig });
        if (topK === TOPK && !(r === 0 && i !== TOPKS.indexOf(TOPK))) recallMs.push(performance.now() - t);
        const got = new Set(res.messages.map(m => m.id));
        row.scores[topK] = ev.filter(e => got.has(`${key}:${e}`)).length / ev.length;
        row.returned[topK] = res.messages.length;
      }
      if (r === 0) scored.push(row);
    }
    runs.push({ resource: resourceId, messages: nMsg, save_ms_p50: +pct(saveMs, 0.5).toFixed(3), save_ms_p95: +pct(saveMs, 0.95).toFixed(3),
      recall_ms_p50: +pct(recallMs, 0.5).toFixed(3), recall_ms_p95: +pct(recallMs, 0.95).toFixed(3) });
  }
  for (const k of TOPKS) {
    const rows = scored.filter(q => k in q.scores);
    topks[k] = { evidence_recall: +mean(rows.map(q => q.scores[k])).toFixed(3), mean_messages_returned: +mean(rows.map(q => q.returned[k])).toFixed(1) };
  }
  const head = runs[0], base = topks[TOPK] ?? topks[TOPKS[0]];
  const out = { system: 'mastra-1.x', conversation: conv.sample_id, messages: head.messages, questions: scored.length,
    topK: TOPK, messageRange: RANGE, save_ms_p50: +head.save_ms_p50.toFixed(2), save_ms_p95: +head.save_ms_p95.toFixed(2),
    recall_ms_p50: +head.recall_ms_p50.toFixed(2), recall_ms_p95: +head.recall_ms_p95.toFixed(2),
    mean_messages_returned: base.mean_messages_returned, evidence_recall: base.evidence_recall,
    stored_before: storedBefore, grow_s: +(growMs / 1000).toFixed(1), budget_hit: budgetHit, runs, topks, node: process.version };
  if (SCORES) out.scores = scored;
  console.log(JSON.stringify(out));
}

// One size: the original's ids (no tag). Several: each size's runs get their own ids (`-at<size>`).
for (const size of SIZES) {
  await growTo(size);
  await measure(SIZES.length > 1 ? `-at${size}` : '');
  if (budgetHit) break;
}

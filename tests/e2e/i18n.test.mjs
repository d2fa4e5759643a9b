// i18n.test.mjs — the dictionaries agree with each other and with the code:
// same keys in every language, same {placeholders}, no empty string, plural
// forms that fit their language, and every key the frontend names exists.
// The dictionaries are read merged (web/locales/<lang>.js joins the
// per-area parts in web/locales/<lang>/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from '../lib/server.mjs';
import { DICTIONARIES, LANGUAGES, matchLanguage, t, setLanguage, fromServer } from '../../web/i18n.js';
import { errorParts } from '../../web/ui.js';
import { ROLE_NAMES } from '../../web/roles.js';

const en = DICTIONARIES.en;
const forms = (v) => (typeof v === 'string' ? [v] : Object.values(v));
// The placeholders of a value, all its plural forms together.
const placeholders = (v) => [...new Set(forms(v).flatMap((s) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1])))].sort();
const isPlural = (v) => v !== null && typeof v === 'object';

function sources(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'locales' ? [] : sources(p);
    return p.endsWith('.js') ? [p] : [];
  });
}

test('every language listed in the switch has a dictionary', () => {
  for (const { code } of LANGUAGES) assert.ok(DICTIONARIES[code], `no dictionary for ${code}`);
  assert.deepEqual(LANGUAGES.map((l) => l.code).sort(), Object.keys(DICTIONARIES).sort());
});

for (const [code, dict] of Object.entries(DICTIONARIES)) {
  if (code === 'en') continue;
  test(`en and ${code} have the same keys`, () => {
    const missing = Object.keys(en).filter((k) => !(k in dict));
    const extra = Object.keys(dict).filter((k) => !(k in en));
    assert.deepEqual(missing, [], `keys in en missing from ${code}`);
    assert.deepEqual(extra, [], `keys in ${code} missing from en`);
  });

  test(`en and ${code} use the same placeholders`, () => {
    const differ = Object.keys(en).filter((k) => k in dict && placeholders(en[k]).join() !== placeholders(dict[k]).join());
    assert.deepEqual(differ, []);
  });

  test(`en and ${code} count in the same sentences`, () => {
    const differ = Object.keys(en).filter((k) => k in dict && isPlural(en[k]) !== isPlural(dict[k]));
    assert.deepEqual(differ, [], 'plural in one language, a plain string in the other');
  });
}

test('every language is split into the same parts', () => {
  const parts = (code) => readdirSync(join(ROOT, 'web/locales', code)).filter((f) => f.endsWith('.js')).sort();
  for (const { code } of LANGUAGES) assert.deepEqual(parts(code), parts('en'), `web/locales/${code}/`);
});

test('no translation is empty', () => {
  for (const [code, dict] of Object.entries(DICTIONARIES)) {
    const empty = Object.entries(dict)
      .filter(([, v]) => !(typeof v === 'string' || isPlural(v)) || forms(v).some((s) => typeof s !== 'string' || !s.trim()))
      .map(([k]) => k);
    assert.deepEqual(empty, [], `empty strings in ${code}`);
  }
});

test('plural forms are the language’s own categories, all of them', () => {
  for (const [code, dict] of Object.entries(DICTIONARIES)) {
    const categories = new Intl.PluralRules(code).resolvedOptions().pluralCategories.sort();
    const wrong = Object.entries(dict)
      .filter(([, v]) => isPlural(v) && Object.keys(v).sort().join() !== categories.join())
      .map(([k, v]) => `${k}: ${Object.keys(v).join()}`);
    assert.deepEqual(wrong, [], `${code} plural forms should be exactly ${categories.join()}`);
  }
});

test('every key the frontend names exists in the dictionaries', () => {
  // A quoted "area.name" whose area is one of the dictionary's areas is a key
  // (t('x.y'), label: 'x.y', ...). Keys built at run time are listed below.
  const areas = new Set(Object.keys(en).map((k) => k.split('.')[0]));
  const unknown = [];
  for (const file of sources(join(ROOT, 'web'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/'([a-z][A-Za-z]*(?:\.[A-Za-z][\w]*)+)'/g)) {
      const key = m[1];
      if (areas.has(key.split('.')[0]) && !(key in en)) unknown.push(`${relative(ROOT, file)}: ${key}`);
    }
  }
  assert.deepEqual(unknown, []);
  for (const r of ROLE_NAMES) assert.ok(`role.${r}` in en, `role.${r}`);
  for (const s of ['read', 'write']) assert.ok(`scope.${s}` in en, `scope.${s}`);
});

test('every server error code and queue reason code has a sentence', () => {
  // Read from the server's sources (the one table of codes, the one switch of
  // reasons) so a new code cannot be missed; 'new' is the queue's default.
  const rc = readFileSync(join(ROOT, 'server/base/rc.c'), 'utf8');
  const codes = [...rc.matchAll(/\[RC_\w+\] = \{ \d+, "(\w+)" \}/g)].map((m) => m[1]).filter((c) => c !== 'ok');
  assert.ok(codes.length > 10, 'error codes found in server/base/rc.c');
  assert.deepEqual(codes.filter((c) => !(`error.code.${c}` in en)), [], 'error codes without a sentence');
  const place = readFileSync(join(ROOT, 'server/sched/place.c'), 'utf8');
  const reasons = [...place.matchAll(/case REASON_\w+: return "(\w+)";/g)].map((m) => m[1]).filter((c) => c !== 'none');
  assert.ok(reasons.length > 5, 'reason codes found in server/sched/place.c');
  assert.deepEqual([...reasons, 'new'].filter((c) => !(`inst.reason.${c}` in en)), [], 'reason codes without a sentence');
});

test('server errors: the server’s words in English, the code’s sentence elsewhere', () => {
  const err = { code: 'conflict', message: 'pool \'a100\' exists', hint: 'choose another name' };
  setLanguage('en');
  assert.deepEqual(errorParts(err), { text: 'pool \'a100\' exists — choose another name', detail: '' });
  assert.deepEqual(fromServer('inst.reason.capacity', 'no node of pool \'a\' has 2 free slices'),
    { text: 'no node of pool \'a\' has 2 free slices', detail: '' });
  setLanguage('zh-CN');
  assert.deepEqual(errorParts(err), { text: DICTIONARIES['zh-CN']['error.code.conflict'], detail: 'pool \'a100\' exists — choose another name' });
  assert.deepEqual(errorParts({ code: 'no_such_code', message: 'odd' }), { text: 'odd', detail: '' }, 'unknown code: the server’s words');
  assert.deepEqual(errorParts(new Error('made here')), { text: 'made here', detail: '' });
  assert.equal(fromServer('inst.reason.capacity', 'x').text, DICTIONARIES['zh-CN']['inst.reason.capacity']);
  setLanguage('en');
});

test('a refusal with numbers (never_fits, exceeds_quota) reads in the interface’s language', () => {
  const err = {
    code: 'never_fits', message: "no node in pool 'a100' with 1 slice can ever give 16000 millicores of cpu: the largest has 2 CPU cores",
    hint: 'ask for at most 2000 millicores of cpu', details: [{ what: 'cpu_millis', most: 2000, asked: 16000, pool: 'a100' }],
  };
  const server = `${err.message} — ${err.hint}`;
  setLanguage('en');
  assert.deepEqual(errorParts(err), { text: server, detail: '' }, 'English: the server’s own words');
  setLanguage('zh-CN');
  assert.deepEqual(errorParts(err), { text: '池“a100”中没有节点能提供 16 个 CPU 核：最大的节点只有 2 个。请最多申请 2 个。', detail: server });
  const mem = errorParts({ code: 'exceeds_quota', message: 'x', details: [{ what: 'mem_mib', most: 16384, asked: 20480, pool: null }] });
  assert.equal(mem.text, '您在集群的配额同时最多允许 16 GiB 内存，此请求需要 20 GiB。请最多申请 16 GiB，或请管理员提高配额。');
  // every detail the server sends has a sentence in every language
  for (const code of ['never_fits', 'exceeds_quota'])
    for (const what of code === 'never_fits' ? ['slices', 'cpu_millis', 'mem_mib', 'nodes'] : ['slices', 'cpu_millis', 'mem_mib', 'gpu_hours'])
      assert.ok(`error.${code}.${what}` in en, `error.${code}.${what}`);
  // a detail without a sentence: the code's sentence, as before
  assert.equal(errorParts({ code: 'never_fits', message: 'm', details: [{ what: 'gpus_of_mars', most: 1, asked: 2 }] }).text, DICTIONARIES['zh-CN']['error.code.never_fits']);
  setLanguage('en');
});

test('t() fills placeholders and falls back to the key', () => {
  setLanguage('en');
  assert.equal(t('home.welcome', { name: 'Ada' }), 'Welcome, Ada');
  assert.equal(t('no.such.key'), 'no.such.key');
  assert.equal(t('pools.nodeGpus', { count: 1 }), '1 GPU');
  assert.equal(t('pools.nodeGpus', { count: 0 }), '0 GPUs');
  assert.equal(t('pools.nodeGpus', { count: 1234 }), '1,234 GPUs');
  assert.equal(t('pools.nodeGpus'), '{count} GPUs', 'no count: the other form, placeholder left');
  setLanguage('zh-CN');
  assert.equal(t('nav.home'), '首页');
  assert.equal(t('pools.nodeGpus', { count: 1 }), '1 块 GPU');
  assert.equal(t('login.throttled', { seconds: 30 }), '登录尝试次数过多，请等待 30 秒后重试。');
  setLanguage('en');
});

test('browser languages map to a dictionary', () => {
  assert.equal(matchLanguage('zh-CN'), 'zh-CN');
  assert.equal(matchLanguage('zh'), 'zh-CN');
  assert.equal(matchLanguage('zh-Hans-CN'), 'zh-CN');
  assert.equal(matchLanguage('en-GB'), 'en');
  assert.equal(matchLanguage('fr'), 'en');
  assert.equal(matchLanguage(undefined), 'en');
});

// server/api/openapi.yaml stays true and valid: it is a valid OpenAPI 3.0
// document for a real validator (@apidevtools/swagger-parser, what client
// generators build on), documents every routed path and method (from
// `gpucloudd --print-routes`) and nothing else, marks exactly the public
// routes as needing no credentials, declares every path parameter and no
// other, names every operation with a unique operationId, resolves every
// $ref, and is what the server serves.
//
// The router's rest-of-path capture `{name...}` has no OpenAPI form: the
// document writes it `{name}`, a parameter that may hold slashes, and the
// routes are compared in that form.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import SwaggerParser from '@apidevtools/swagger-parser';
import { startServer, BIN, ROOT } from '../lib/server.mjs';
import { stopClean } from '../lib/itest.mjs';

const FILE = join(ROOT, 'server/api/openapi.yaml');
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

// The router's `{name...}` (the rest of the path) as the document writes it.
const asDocumented = (path) => path.replace(/\{([^}]+)\.\.\.\}/g, '{$1}');

function routes() {
  const out = execFileSync(BIN, ['--print-routes'], { encoding: 'utf8' });
  const list = out.trim().split('\n').map((l) => {
    const [method, path, roles] = l.trim().split(/\s+/);
    return { method, path: asDocumented(path), roles };
  });
  assert.ok(list.length > 0, '--print-routes printed nothing');
  for (const r of list) assert.match(r.method, /^[A-Z]+$/, JSON.stringify(r));
  return list;
}

function load() {
  assert.ok(existsSync(FILE), 'server/api/openapi.yaml is missing');
  const doc = YAML.parse(readFileSync(FILE, 'utf8'));
  assert.ok(doc && typeof doc === 'object', 'openapi.yaml is not a mapping');
  assert.match(String(doc.openapi), /^3\./, 'not an OpenAPI 3 document');
  assert.ok(doc.paths && typeof doc.paths === 'object', 'no paths');
  return doc;
}

// Paths in the document, made absolute with the first server's URL path.
function documented(doc) {
  let prefix = '';
  const url = doc.servers?.[0]?.url;
  if (url) prefix = new URL(url, 'http://x').pathname.replace(/\/$/, '');
  const ops = [];
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const m of Object.keys(item)) {
      if (!METHODS.includes(m)) continue;
      ops.push({ method: m.toUpperCase(), path: prefix + p, docPath: p, op: item[m], item });
    }
  }
  return ops;
}

function resolve(doc, node) {
  let n = node;
  for (let i = 0; n && n.$ref && i < 10; i++) {
    assert.match(n.$ref, /^#\//, `only local $refs: ${n.$ref}`);
    n = n.$ref.slice(2).split('/').reduce((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
    assert.ok(n !== undefined, `unresolved $ref ${node.$ref}`);
  }
  return n;
}

describe('API documentation (server/api/openapi.yaml)', () => {
  let doc, ops, rts;
  before(() => {
    rts = routes();
    doc = load();
    ops = documented(doc);
  });

  it('is valid OpenAPI for a real validator (swagger-parser)', async () => {
    // validate() dereferences in place: give it its own copy.
    const copy = YAML.parse(readFileSync(FILE, 'utf8'));
    try {
      await SwaggerParser.validate(copy);
    } catch (e) {
      // e.message lists every violation with its JSON pointer.
      assert.fail(`server/api/openapi.yaml is not valid OpenAPI: ${e.message}`);
    }
  });

  it('has no YAML slips: no key without a value (an unquoted comma in a {flow: mapping})', () => {
    const bad = [];
    const walk = (n, at) => {
      if (Array.isArray(n)) n.forEach((x, i) => walk(x, `${at}/${i}`));
      else if (n && typeof n === 'object') {
        for (const [k, v] of Object.entries(n)) {
          if (v === null && k !== 'example' && k !== 'default') bad.push(`${at}/${k}`);
          walk(v, `${at}/${k}`);
        }
      }
    };
    walk(doc, '#');
    assert.deepEqual(bad, [], 'keys with no value: quote the description they were cut from');
  });

  it('documents every routed path and method', () => {
    const have = new Set(ops.map((o) => `${o.method} ${o.path}`));
    const missing = rts.filter((r) => !have.has(`${r.method} ${r.path}`)).map((r) => `${r.method} ${r.path}`);
    assert.deepEqual(missing, [], 'routes missing from openapi.yaml');
  });

  it('documents nothing that is not routed (HEAD is implied by GET)', () => {
    const routed = new Set(rts.map((r) => `${r.method} ${r.path}`));
    const extra = ops.filter((o) => !routed.has(`${o.method} ${o.path}`) &&
      !(o.method === 'HEAD' && routed.has(`GET ${o.path}`))).map((o) => `${o.method} ${o.path}`);
    assert.deepEqual(extra, [], 'openapi.yaml documents operations the server does not route');
  });

  it('marks exactly the public routes as needing no credentials', () => {
    const globalSec = doc.security;
    for (const r of rts) {
      const o = ops.find((x) => x.method === r.method && x.path === r.path);
      if (!o) continue; // reported above
      const sec = o.op.security ?? globalSec;
      const open = Array.isArray(sec) ? sec.length === 0 || sec.some((s) => Object.keys(s).length === 0) : !sec;
      assert.equal(open, r.roles === 'public', `${r.method} ${r.path} is ${r.roles} but documented as ${open ? 'public' : 'authenticated'}`);
    }
  });

  it('declares every path parameter, and no other, and gives every operation responses', () => {
    for (const o of ops) {
      const names = [...o.docPath.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const params = [...(o.item.parameters || []), ...(o.op.parameters || [])].map((p) => resolve(doc, p));
      for (const n of names) {
        assert.match(n, /^[A-Za-z_][A-Za-z0-9_]*$/, `${o.method} ${o.docPath}: '{${n}}' is not an OpenAPI path template (write {path...} as {path})`);
        const p = params.find((x) => x && x.in === 'path' && x.name === n);
        assert.ok(p, `${o.method} ${o.docPath}: path parameter '${n}' is not declared`);
        assert.equal(p.required, true, `${o.method} ${o.docPath}: path parameter '${n}' must be required`);
      }
      for (const p of params) {
        if (p && p.in === 'path') assert.ok(names.includes(p.name), `${o.method} ${o.docPath}: path parameter '${p.name}' is declared but not in the path`);
      }
      assert.ok(o.op.responses && Object.keys(o.op.responses).length > 0, `${o.method} ${o.docPath} has no responses`);
      for (const [code, resp] of Object.entries(o.op.responses)) {
        assert.match(code, /^([1-5]\d\d|[1-5]XX|default)$/, `${o.method} ${o.docPath}: response key ${code}`);
        const rr = resolve(doc, resp);
        assert.equal(typeof rr.description, 'string', `${o.method} ${o.docPath} ${code} has no description`);
      }
    }
  });

  it('names every operation with a unique operationId (the method names of a generated client)', () => {
    const seen = new Map();
    for (const o of ops) {
      const id = o.op.operationId;
      assert.match(String(id), /^[A-Za-z][A-Za-z0-9]*$/, `${o.method} ${o.docPath}: operationId ${id}`);
      assert.ok(!seen.has(id), `${o.method} ${o.docPath}: operationId ${id} is also ${seen.get(id)}`);
      seen.set(id, `${o.method} ${o.docPath}`);
    }
  });

  it('resolves every $ref in the document', () => {
    const walk = (n) => {
      if (Array.isArray(n)) n.forEach(walk);
      else if (n && typeof n === 'object') {
        if (typeof n.$ref === 'string') resolve(doc, n);
        Object.values(n).forEach(walk);
      }
    };
    walk(doc);
  });

  describe('as served', () => {
    let srv;
    before(async () => {
      srv = await startServer({ args: [`--openapi-file=${FILE}`] });
    });
    after(async () => { await stopClean(srv); });

    it('serves the same document at /api/v1/openapi.yaml', async () => {
      const res = await fetch(`${srv.base}/api/v1/openapi.yaml`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type'), /yaml/);
      assert.equal(await res.text(), readFileSync(FILE, 'utf8'));
    });
  });
});

// classes.test.mjs — classes end to end in a real headless Chromium against
// a real gpucloudd: a teacher creates a class, checks and imports a
// 30-student CSV roster and sees the one-time password sheet, sets the
// students' limits (one above the class is refused with the class's
// figure), makes an invite link; a student opens the link, joins and sees
// the class with their limits; the pages in Simplified Chinese.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { launch, shot, newPage } from './browser.mjs';
import { DICTIONARIES } from '../../web/i18n.js';

const en = DICTIONARIES.en;
const zh = DICTIONARIES['zh-CN'];
const PW = 'class-pass-123';

describe('classes pages', () => {
  let srv, browser, api, page, classId, inviteUrl;
  const pageErrors = [];

  async function signIn(p, username, password, button = 'Sign in') {
    await p.goto(`${srv.base}/#/login`);
    await p.locator('input[name=username]').fill(username);
    await p.locator('input[name=password]').fill(password);
    await p.getByRole('button', { name: button }).click();
    await p.locator('[data-nav="home"]').waitFor();
  }

  before(async () => {
    srv = await startServer();
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const [u, role] of [['eteach', 'teacher'], ['ejoin', 'student']]) {
      const r = await api.post('/api/v1/users', { username: u, role, password: PW, display_name: `User ${u}` });
      assert.equal(r.status, 201, r.text);
    }
    browser = await launch();
    page = await newPage(browser, pageErrors);
  });

  after(async () => {
    if (page) { try { await shot(page, 'classes-final'); } catch { /* the browser may be gone */ } }
    await browser?.close();
    await srv?.stop();
  });

  it('a teacher creates a class', async () => {
    await signIn(page, 'eteach', PW);
    await page.locator('[data-nav="classes"]').click();
    await page.getByRole('heading', { name: en['nav.classes'], level: 1 }).waitFor();
    await page.getByText(en['classes.noneTeacher']).waitFor();
    await page.locator('[data-action=new-class]').click();
    const d = page.locator('dialog[open]');
    await d.getByLabel(en['class.name']).fill('Machine Learning');
    await d.getByLabel(en['class.code']).fill('ML-2026');
    await d.getByLabel(en['class.term']).fill('Spring 2026');
    await d.getByLabel(en['class.description']).fill('Lectures on Mondays, labs on Thursdays.');
    await shot(page, 'classes-new');
    await d.locator('[data-action=create-class]').click();
    await page.locator('[data-page=class] h1').getByText('Machine Learning').waitFor();
    classId = Number(new URL(page.url().replace('#', '')).searchParams.get('id'));
    assert.ok(classId > 0, page.url());
    await page.locator('[data-card=limits]').waitFor();
    assert.match(await page.locator('.class-tabs').textContent(), /Overview.*Roster/);
    assert.equal(await page.locator('.class-tabs .tab.active').getAttribute('data-tab'), 'overview');
    await shot(page, 'class-overview-teacher');
  });

  it('imports a 30-student roster: check, import, the one-time password sheet', { timeout: 300000 }, async () => {
    await page.locator('.class-tabs [data-tab=roster]').click();
    await page.locator('[data-table=roster] tr[data-member=eteach]').waitFor();
    await page.locator('[data-action=open-import]').click();
    const d = page.locator('dialog[open]');
    const rows = Array.from({ length: 30 }, (_, i) => `stu${String(i + 1).padStart(2, '0')},Student ${i + 1},stu${i + 1}@example.edu,student`);
    await d.locator('#roster-csv').fill(`username,display_name,email,role\n${rows.join('\n')}\nejoin,,,student\n`);
    await d.locator('[data-action=check-import]').click();
    await d.locator('[data-table=import-report]').waitFor();
    assert.equal(await d.locator('[data-table=import-report] tr[data-result=create]').count(), 30);
    assert.equal(await d.locator('[data-table=import-report] tr[data-result=link]').count(), 1);
    assert.equal((await api.get(`/api/v1/classes/${classId}`)).json.counts.students, 0, 'a check changes nothing');
    // then a line with a problem: nothing is imported, the line is named
    await d.locator('#roster-csv').fill(`username,role\nstu01,student\nBad Name,student\n`);
    await d.locator('[data-action=import]').click();
    await d.locator('[data-import-errors] li[data-line="3"]').waitFor();
    await shot(page, 'class-roster-import-errors');
    await d.locator('#roster-csv').fill(`username,display_name,email,role\n${rows.join('\n')}\n`);
    await d.locator('[data-action=import]').click();
    // 30 scrypt hashes on the server's two password threads
    await d.locator('[data-import-result]').waitFor({ timeout: 180000 });
    const pw = d.locator('[data-sheet] td[data-password]');
    assert.equal(await pw.count(), 30);
    const first = await pw.first().textContent();
    assert.ok(first.length >= 16, first);
    assert.ok(await d.locator('[data-action=download-sheet]').isVisible());
    await shot(page, 'class-roster-sheet');
    // the one-time password works (and must be changed)
    const c = new Client(srv.base);
    const r = await c.login('stu01', first);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.user.must_change_password, true);
    await d.locator('[data-action=done]').click();
    await page.locator('[data-table=roster] tr[data-member=stu30]').waitFor();
    assert.equal(await page.locator('[data-table=roster] tbody tr').count(), 31);
  });

  it('suspends and resumes a student, sets limits within the class', async () => {
    await page.locator('tr[data-member=stu02] [data-action=suspend]').click();
    await page.locator('tr[data-member=stu02][data-state=suspended]').waitFor();
    await page.locator('tr[data-member=stu02] [data-action=resume]').click();
    await page.locator('tr[data-member=stu02][data-state=active]').waitFor();
    await page.locator('.class-tabs [data-tab=overview]').click();
    const f = page.locator('[data-form=limits]');
    await f.locator('input[name=slices]').fill('1');
    await f.locator('[data-action=save-limits]').click();
    await f.locator('.msg-error').waitFor();
    assert.match(await f.locator('.msg-error').textContent(), /student_limits\.slices 1 is more than the class holds \(0\)/);
    await f.locator('input[name=slices]').fill('');
    await f.locator('input[name=cpu_millis]').fill('2');
    await f.locator('input[name=max_session_s]').fill('3');
    await f.locator('[data-action=save-limits]').click();
    await page.waitForFunction(async (id) => {
      const r = await fetch(`/api/v1/classes/${id}`);
      const c = await r.json();
      return c.student_limits.cpu_millis === 2000 && c.student_limits.max_session_s === 10800;
    }, classId);
    await shot(page, 'class-overview-limits');
  });

  it('makes an invite link; a student joins by it', async () => {
    await page.locator('.class-tabs [data-tab=roster]').click();
    await page.locator('[data-action=make-invite]').click();
    const secret = page.locator('[data-invite-code] [data-secret]');
    await secret.waitFor();
    inviteUrl = await secret.inputValue();
    assert.match(inviteUrl, /#\/join\?code=[A-Za-z0-9_-]{16,}$/);
    await page.locator('[data-field=invite-state]').getByText(/active until/).waitFor();
    await shot(page, 'class-roster-invite');

    const errs = [];
    const sp = await newPage(browser, errs);
    try {
      // opened before signing in: the sign-in leads back to it, code and all
      await sp.goto(inviteUrl);
      await sp.locator('input[name=username]').fill('ejoin');
      await sp.locator('input[name=password]').fill(PW);
      await sp.getByRole('button', { name: 'Sign in' }).click();
      await sp.getByRole('heading', { name: en['class.join.title'] }).waitFor();
      assert.equal(await sp.locator('[data-form=join] input[name=code]').inputValue(), inviteUrl.split('code=')[1]);
      await shot(sp, 'class-join');
      await sp.locator('[data-action=join-class]').click();
      await sp.locator('[data-page=class] h1').getByText('Machine Learning').waitFor();
      await sp.locator('[data-card=my-limits]').waitFor();
      assert.match(await sp.locator('[data-field=limit-cpu_millis]').textContent(), /2 CPU cores/);
      assert.equal(await sp.locator('[data-card=limits]').count(), 0, 'students do not get the teacher forms');
      assert.equal(await sp.locator('.class-tabs [data-tab=roster]').count(), 0, 'nor the roster');
      await shot(sp, 'class-overview-student');
      await sp.goto(`${srv.base}/#/classes`);
      await sp.locator('tr[data-class="ML-2026"] [data-class-role=student]').waitFor();
      assert.deepEqual(errs, []);
    } finally { await sp.context().close(); }
    const m = (await api.get(`/api/v1/classes/${classId}/members`)).json.items.find((x) => x.user.username === 'ejoin');
    assert.equal(m.via, 'invite');
    assert.equal(m.role, 'student');
  });

  it('an admin caps classes per teacher and grants the allocation', async () => {
    const errs = [];
    const ap = await newPage(browser, errs);
    try {
      assert.equal((await api.post('/api/v1/pools', { name: 'teach' })).status, 201);
      await signIn(ap, 'admin', ADMIN_PASSWORD);
      await ap.goto(`${srv.base}/#/classes`);
      await ap.locator('tr[data-class="ML-2026"]').waitFor();
      await ap.locator('[data-field=max-classes]').fill('3');
      await ap.locator('[data-action=save-cap]').click();
      await ap.locator('[data-form=class-cap] .msg-success').waitFor();
      assert.equal((await api.get('/api/v1/settings')).json.max_classes_per_teacher.value, '3');
      await shot(ap, 'classes-admin');
      await ap.goto(`${srv.base}/#/class?id=${classId}`);
      const f = ap.locator('[data-form=allocation]');
      await f.locator('select[name=pool]').selectOption('teach');
      await f.locator('input[name=slices]').fill('1');
      await f.locator('[data-action=save-allocation]').click();
      await f.locator('.msg-error').getByText(/pool 'teach' has 0 slices; the allocation asks 1/).waitFor();
      await f.locator('input[name=slices]').fill('0');
      await f.locator('input[name=storage_bytes]').fill('20');
      await f.locator('[data-action=save-allocation]').click();
      await ap.waitForFunction(async (id) => {
        const c = await (await fetch(`/api/v1/classes/${id}`)).json();
        return c.pool?.name === 'teach' && c.allocation.storage_bytes === 20 * 1024 ** 3;
      }, classId);
      await shot(ap, 'class-overview-admin');
      assert.deepEqual(errs, []);
    } finally { await ap.context().close(); }
  });

  it('shows the pages in Simplified Chinese', async () => {
    const errs = [];
    const zp = await newPage(browser, errs, 'zh-CN');
    try {
      await signIn(zp, 'eteach', PW, zh['login.submit']);
      await zp.goto(`${srv.base}/#/classes`);
      await zp.getByRole('heading', { name: zh['nav.classes'], level: 1 }).waitFor();
      assert.equal(await zp.locator('html').getAttribute('lang'), 'zh-CN');
      await zp.locator('tr[data-class="ML-2026"]').getByText(zh['class.role.owner']).waitFor();
      await shot(zp, 'classes-zh');
      await zp.goto(`${srv.base}/#/class?id=${classId}`);
      await zp.getByRole('heading', { name: zh['class.studentLimits'] }).waitFor();
      const f = zp.locator('[data-form=limits]');
      await f.locator('input[name=slices]').fill('2');
      await f.locator('[data-action=save-limits]').click();
      await f.locator('.msg-error').getByText(/学生的额度不能超过班级的总量：0 个 GPU 切片/).waitFor();
      await shot(zp, 'class-overview-zh');
      await zp.goto(`${srv.base}/#/class/roster?id=${classId}`);
      await zp.locator('[data-table=roster] tr[data-member=stu01]').waitFor();
      assert.match(await zp.locator('[data-table=roster] thead').textContent(), new RegExp(zh['roster.role']));
      await shot(zp, 'class-roster-zh');
      assert.deepEqual(errs, []);
    } finally { await zp.context().close(); }
    assert.deepEqual(pageErrors, []);
  });
});

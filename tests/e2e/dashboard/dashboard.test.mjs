// End-to-end test of `xtrain dashboard` in a real browser (Debian's chromium, driven by
// playwright-core): a dashboard with a token on a free loopback port, two short training runs
// appearing live, a chart with exactly as many points as metrics.jsonl has lines for it, live
// growth when lines are appended, the breakdown table, ".." paths and a missing token refused,
// the token traded for an HttpOnly cookie and dropped from the address bar (also when the link is
// followed from another site), and a run name made of HTML shown as text. Saves a screenshot to
// <artifacts>/dashboard.png.
// Usage: node dashboard.test.mjs <xtrain binary> <artifacts dir> [--plain-config]
//   --plain-config: no monitor keys in the training config (for a build without them).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [xtrain, artifacts] = process.argv.slice(2);
const plainConfig = process.argv.includes('--plain-config');
const TOKEN = 'e2e-' + Math.random().toString(36).slice(2);
const children = [];
let failures = 0;

function ok(cond, what) {
  console.log((cond ? 'ok - ' : 'not ok - ') + what);
  if (!cond) failures += 1;
}

async function waitFor(fn, what, timeoutMs = 30000) {  // a generous bound, not a timing assertion
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('timed out waiting for ' + what + ' (last: ' + last + ')');
}

function start(args, name) {
  const child = spawn(xtrain, args, {stdio: ['ignore', 'pipe', 'pipe'], env: {...process.env, OMP_NUM_THREADS: '1'}});
  child.output = '';
  child.stdout.on('data', (d) => { child.output += d; });
  child.stderr.on('data', (d) => { child.output += d; });
  child.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  child.label = name;
  children.push(child);
  return child;
}

function rawGet(port, rawPath, headers = {}) {  // node's http sends the path as written: no ".." folding
  return new Promise((resolve, reject) => {
    const req = http.request({host: '127.0.0.1', port, path: rawPath, headers}, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({status: res.statusCode, body}));
    });
    req.on('error', reject);
    req.end();
  });
}

function writeInputs(dir) {
  const words = ['the', 'whale', 'sea', 'ship', 'captain', 'white', 'deep', 'harpoon', 'storm', 'sail'];
  let text = '';
  for (let i = 0; text.length < 24000; i++) text += words[(i * 7 + (i >> 3)) % words.length] + (i % 13 ? ' ' : '.\n');
  fs.writeFileSync(path.join(dir, 'corpus.txt'), text);
  const config = {
    train_micro_batch_size_per_gpu: 4,
    optimizer: {type: 'AdamW', params: {lr: 3e-3}},
    steps_per_print: 10,
    xtrain: {
      model: {type: 'gpt', layers: 1, d_model: 32, heads: 2, seq_len: 32},
      data: {type: 'text', path: path.join(dir, 'corpus.txt')},
      steps: 40, log_interval: 1, eval_interval: 20, eval_batches: 4, save_interval: 0,
      generate: {tokens: 0},
    },
  };
  if (!plainConfig) {
    config.wall_clock_breakdown = true;
    config.tensorboard = {enabled: true};
  }
  fs.writeFileSync(path.join(dir, 'tiny.json'), JSON.stringify(config, null, 2));
}

function countLines(file, key) {
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() && key in JSON.parse(l)).length;
}

async function train(dir, logdir, name, extra) {
  const run = start(['train', '--config', path.join(dir, 'tiny.json'), '--output', path.join(logdir, name), ...extra],
                    'train ' + name);
  const code = await run.exited;
  if (code !== 0) throw new Error('xtrain train ' + name + ' exited with ' + code + ':\n' + run.output);
}

async function main() {
  fs.mkdirSync(artifacts, {recursive: true});
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xtrain-e2e-dashboard-'));
  const logdir = path.join(dir, 'runs');
  fs.mkdirSync(logdir);
  writeInputs(dir);

  const dash = start(['dashboard', '--logdir', logdir, '--port', '0', '--token', TOKEN], 'dashboard');
  const url = await waitFor(() => (dash.output.match(/dashboard: (http:\/\/127\.0\.0\.1:\d+\/\S*)/) || [])[1],
                            'the dashboard address on stdout', 20000);
  const port = Number(new URL(url).port);
  ok(!dash.output.includes(TOKEN), 'the dashboard never prints its token: ' + dash.output.trim().split('\n')[0]);
  const entry = url + '?token=' + TOKEN;  // what the user opens once
  const bearer = {Authorization: 'Bearer ' + TOKEN};

  // Refusals, spoken raw (a browser would fold the ".." before sending).
  for (const p of ['/static/../../../../etc/passwd', '/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd', '/static/..%2fweb/app.js']) {
    const r = await rawGet(port, p, bearer);
    ok(r.status === 400 && !r.body.includes('root:'), 'traversal ' + p + ' -> ' + r.status);
  }
  for (const p of ['/', '/api/runs', '/static/app.js', '/api/events']) {
    ok((await rawGet(port, p)).status === 401, 'no token: ' + p + ' -> 401');
  }
  ok((await rawGet(port, '/api/runs', bearer)).status === 200, 'bearer token accepted');
  const traded = await rawGet(port, '/?token=' + TOKEN);
  ok(traded.status === 200 && traded.body.includes('http-equiv="refresh" content="0; url=/"') &&
     !traded.body.includes(TOKEN), '?token= is answered with a page that moves on to "/" (' + traded.status + ')');

  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const page = await browser.newPage({viewport: {width: 1440, height: 960}});
  const consoleErrors = [];
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  try {
    await page.goto(entry);
    await waitFor(() => page.evaluate(() => window.xtrainDashboard && window.xtrainDashboard.state.connected),
                  'the event stream to connect');
    ok(!page.url().includes('token'), 'the token left the address bar: ' + page.url());
    ok((await page.evaluate(() => document.cookie)) === '', 'the session cookie is HttpOnly (not visible to scripts)');
    ok(await page.isVisible('#no-runs'), 'empty log folder: the page says so');
    const stranger = await browser.newContext();  // no cookie
    const refused = await (await stranger.newPage()).goto(url + 'api/runs');
    ok(refused.status() === 401, 'a browser without the cookie is refused: ' + refused.status());
    // The link followed from another site (a data: page: an opaque origin, so a cross-site
    // navigation): the SameSite=Strict cookie must still reach the page after the redirect.
    const elsewhere = await stranger.newPage();
    await elsewhere.goto('data:text/html,<a id=go href="' + entry + '">dashboard</a>');
    await Promise.all([elsewhere.waitForURL(url), elsewhere.click('#go')]);
    await waitFor(() => elsewhere.evaluate(() => window.xtrainDashboard && window.xtrainDashboard.state.connected),
                  'the dashboard opened from a link on another site to connect');
    ok(true, 'the dashboard opened from a link on another site works');
    await stranger.close();

    // Two runs, trained while the page is open: they must appear by themselves.
    await train(dir, logdir, 'gpt-lr3e-3', []);
    await waitFor(() => page.isVisible('li[data-run="gpt-lr3e-3"]'), 'the first run in the list');
    await train(dir, logdir, 'gpt-lr1e-3', ['--set', 'optimizer.params.lr=1e-3']);
    await waitFor(() => page.isVisible('li[data-run="gpt-lr1e-3"]'), 'the second run in the list');
    ok(true, 'both runs appeared in the list without a reload');

    const metrics = path.join(logdir, 'gpt-lr3e-3', 'metrics.jsonl');
    const expected = countLines(metrics, 'train/loss');
    ok(expected >= 40, 'metrics.jsonl has ' + expected + ' train/loss lines');
    await waitFor(() => page.evaluate(([n]) => window.xtrainDashboard.pointCount('train/loss', 'gpt-lr3e-3') === n,
                                      [expected]), 'all train/loss points in the page');
    const chart = page.locator('.chart[data-metric="train/loss"]');
    ok(await chart.isVisible(), 'a train/loss chart is drawn');
    const canvas = await chart.locator('canvas').boundingBox();
    ok(canvas && canvas.width > 300 && canvas.height > 150, 'its canvas is ' + (canvas && canvas.width) + 'x' +
       (canvas && canvas.height));
    // The second run's points arrive by their own events: wait for them rather than race them.
    await waitFor(async () => (await chart.getAttribute('data-points')) === String(2 * expected),
                  'the chart to hold both runs\' points');
    ok((await chart.getAttribute('data-points')) === String(2 * expected),
       'the chart holds ' + 2 * expected + ' points (two runs overlaid)');
    const legend = await chart.locator('.u-legend').innerText();
    ok(legend.includes('gpt-lr3e-3') && legend.includes('gpt-lr1e-3'), 'both runs are in the chart legend');

    if (!plainConfig) {
      await waitFor(() => page.isVisible('#breakdown table'), 'the breakdown table');
      const stages = await page.locator('#breakdown td:first-child').allInnerTexts();
      ok(stages.includes('forward') && stages.includes('step'), 'breakdown stages: ' + stages.join(', '));
    }
    // The screenshot (docs/dashboard.png): a few charts, then the breakdown and the config.
    await page.fill('#smoothing', '0.8');
    await page.fill('#filter', 'loss grad_norm tokens_per_s');
    await waitFor(() => page.evaluate(() => document.querySelectorAll('.chart').length === 4), 'four filtered charts');
    await page.setViewportSize({width: 1440, height: 1180});
    await page.waitForTimeout(500);
    await page.screenshot({path: path.join(artifacts, 'dashboard.png')});
    await page.fill('#filter', '');
    ok(true, 'screenshot saved to ' + path.join(artifacts, 'dashboard.png'));

    // Live growth: lines appended to a finished run show up without a reload.
    const last = JSON.parse(fs.readFileSync(metrics, 'utf8').trim().split('\n').pop());
    for (let i = 1; i <= 5; i++) {
      fs.appendFileSync(metrics, JSON.stringify({step: last.step + i, time: Date.now() / 1000, 'train/loss': 1.5}) + '\n');
    }
    await waitFor(() => page.evaluate(([n]) => window.xtrainDashboard.pointCount('train/loss', 'gpt-lr3e-3') === n,
                                      [expected + 5]), 'appended points');
    ok(true, 'the chart grew by the 5 appended lines');

    // A run name made of HTML is shown as text and runs nothing.
    const evil = '<img src=x onerror="window.__xss=1">';
    fs.mkdirSync(path.join(logdir, evil));
    fs.writeFileSync(path.join(logdir, evil, 'metrics.jsonl'), '{"step":1,"train/loss":2}\n');
    const item = page.locator('li[data-run]').filter({hasText: 'onerror'});
    await waitFor(() => item.isVisible(), 'the HTML-named run');
    ok((await item.locator('.run-name').innerText()) === evil, 'an HTML run name is shown verbatim');
    ok((await page.evaluate(() => window.__xss)) === undefined, 'and its markup did not run');
    ok(consoleErrors.length === 0, 'no errors in the page console' + (consoleErrors.length ? ': ' + consoleErrors : ''));
  } catch (e) {
    await page.screenshot({path: path.join(artifacts, 'dashboard-failure.png')}).catch(() => {});
    throw e;
  } finally {
    await browser.close();
    dash.kill('SIGTERM');
    ok((await dash.exited) === 0, 'the dashboard stops cleanly on SIGTERM');
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

main().then(() => {
  console.log(failures ? failures + ' check(s) failed' : 'all checks passed');
  process.exit(failures ? 1 : 0);
}, (e) => {
  console.error('FAILED: ' + (e && e.stack || e));
  for (const c of children) {
    console.error('--- output of ' + c.label + ':\n' + c.output.slice(-3000));
    c.kill('SIGKILL');
  }
  process.exit(1);
});

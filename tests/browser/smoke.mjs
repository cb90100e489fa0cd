// smoke.mjs - dev helper: opens the page at a URL and size, prints page errors, saves a screenshot.
import { chromium } from 'playwright-core';
const [url, out = '/tmp/smoke.png', w = '1280', h = '800', full = '0'] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
const page = await browser.newPage({ viewport: { width: +w, height: +h } });
page.on('pageerror', e => console.log('PAGEERROR', e.message));
page.on('console', m => { if (m.type() === 'error') console.log('CONSOLE', m.text()); });
await page.goto(url);
await page.waitForTimeout(1500);
if (process.env.EVAL) console.log(await page.evaluate(process.env.EVAL));
await page.screenshot({ path: out, fullPage: full === '1' });
console.log('url', page.url());
await browser.close();

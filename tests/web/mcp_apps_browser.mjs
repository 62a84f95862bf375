// MCP Apps in the web chat, in a real headless Chromium: ext-apps' get-time example app
// (the official App SDK inside the frame) and a hostile app. Run by tests/test_serve_apps.py:
// node mcp_apps_browser.mjs BASE_URL TOKEN SHOT against tests/_mcp_apps_web.py. Prints one
// JSON line per checkpoint; exits non-zero on the first failed check.
import chromium from "@sparticuz/chromium";
import { chromium as pw } from "playwright-core";

const [base, token, shot] = process.argv.slice(2);
const report = (what, data = {}) => console.log(JSON.stringify({ what, ...data }));
function check(cond, message) {
  if (!cond) throw new Error("check failed: " + message);
}

// @sparticuz/chromium's defaults turn the same-origin policy off (--disable-web-security):
// the sandbox is checked under the real web security model, as users' browsers have it.
const insecure = new Set(["--disable-web-security", "--allow-running-insecure-content"]);
const browser = await pw.launch({
  executablePath: await chromium.executablePath(),
  args: chromium.args.filter((a) => !insecure.has(a)),
  headless: true,
});
const problems = [];
const isFrame = (url) => url.includes("/apps/frame/");

try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on("pageerror", (err) => problems.push("page error: " + err.message));
  page.on("dialog", (d) => { problems.push("dialog opened: " + d.message()); d.dismiss(); });
  // The host page's own console only: an app's (its CSP refusing what it tries) is its own.
  page.on("console", (m) => {
    if (m.type() === "error" && !isFrame(m.location().url || "")) problems.push("console: " + m.text());
  });
  await page.goto(`${base}/#token=${token}`);
  await page.waitForSelector("body[data-ready='1']");
  const input = page.locator("[data-testid=chat-input]");
  const idle = () => page.waitForSelector("[data-testid=stop]", { state: "hidden" });
  const say = async (text) => { await input.fill(text); await page.click("[data-testid=send]"); };
  const appFrame = async (n) => {
    for (let i = 0; i < 200; i++) {
      const frames = page.frames().filter((f) => isFrame(f.url()));
      if (frames.length >= n) return frames[n - 1];
      await page.waitForTimeout(50);
    }
    throw new Error("the app frame did not load");
  };

  // The model calls get-time (it needs approval), and its app renders under the result.
  await say("what time is it");
  await page.click("[data-testid=tool-call][data-status=pending] [data-testid=approve]");
  await page.waitForSelector("[data-testid=app-frame]");
  await idle();
  const frameEl = page.locator("[data-testid=app-frame]");
  check(await frameEl.getAttribute("sandbox") === "allow-scripts", "sandboxed, no same-origin");
  const app = await appFrame(1);
  await app.waitForSelector("body[data-connected='1']");
  const timeEl = app.locator("#server-time");
  await app.waitForFunction(() => /^\d{4}-\d\d-\d\dT/.test(document.getElementById("server-time").textContent));
  const first = await timeEl.textContent();
  report("app rendered", { time: first });

  // The app's button calls get-time through the host: the approval shows in the page.
  await app.click("#get-time-btn");
  const pending = page.locator(".from-app[data-status=pending]");
  await pending.waitFor();
  check(await pending.locator("[data-testid=from-app]").count() === 1, "the call is marked as the app's");
  await pending.locator("[data-testid=approve]").click();
  await app.waitForFunction((t) => {
    const text = document.getElementById("server-time").textContent;
    return /^\d{4}-/.test(text) && text !== t;
  }, first);
  await page.waitForSelector(".from-app[data-status=done]");
  report("app call approved in the page", { time: await timeEl.textContent() });

  // The call is in the thread: after a reload, the model's call and the app's.
  await page.reload();
  await page.waitForSelector("body[data-ready='1']");
  const names = await page.$$eval("[data-testid=tool-call]", (ns) => ns.map((n) => n.dataset.name));
  check(JSON.stringify(names) === JSON.stringify(["get-time", "get-time"]), "calls in the thread: " + names);
  check(await page.locator(".from-app [data-testid=from-app]").count() === 1, "the app's call is marked");
  await page.waitForSelector("[data-testid=app-frame]");  // the model's call shows its app again
  report("app call in the thread");

  // A hostile app is contained.
  const url = page.url();
  await say("hostile");
  await idle();
  const hostile = await appFrame(2);
  await hostile.waitForFunction(() => document.getElementById("report").textContent.startsWith("{"),
                                null, { timeout: 60000 });
  const got = JSON.parse(await hostile.locator("#report").textContent());
  report("hostile app ran", got);
  check(got.parent.startsWith("blocked"), "window.parent's document is out of reach");
  check(got.parentStorage.startsWith("blocked"), "the page's storage is out of reach");
  check(got.top.startsWith("blocked"), "no top navigation");
  check(page.url() === url, "the page did not navigate");
  check(got.crossOriginFetch.startsWith("blocked") && got.apiFetch.startsWith("blocked"), "no fetch");
  check(got.callsOk <= 5 && got.callsOk + got.callsFailed === 1000, "1,000 calls: at most 5 ran");
  check(/too many tool calls/.test(got.callError), "a clear error: " + got.callError);
  check(await page.locator("[data-testid=tool-call]").count() >= 3, "the page still works");
  report("hostile app contained");

  await page.screenshot({ path: shot, fullPage: false });
  check(problems.length === 0, "no page errors: " + JSON.stringify(problems));
  report("done");
} finally {
  await browser.close();
}

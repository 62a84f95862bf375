// The web chat in a real headless Chromium (npm @sparticuz/chromium + playwright-core).
// Run by tests/test_serve_browser.py: node chat_browser.mjs BASE_URL TOKEN SCREENSHOT_PATH
// Prints one JSON line per checkpoint; exits non-zero on the first failed check.
import chromium from "@sparticuz/chromium";
import { chromium as pw } from "playwright-core";

const [base, token, screenshot] = process.argv.slice(2);
const report = (what, data = {}) => console.log(JSON.stringify({ what, ...data }));
function check(cond, message) {
  if (!cond) throw new Error("check failed: " + message);
}

// @sparticuz/chromium's defaults turn the same-origin policy off (--disable-web-security):
// the page is checked under the web security model users' browsers have.
const insecure = new Set(["--disable-web-security", "--allow-running-insecure-content"]);
const browser = await pw.launch({
  executablePath: await chromium.executablePath(),
  args: chromium.args.filter((a) => !insecure.has(a)),
  headless: true,
});
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 640 } });
  page.on("pageerror", (err) => problems.push("page error: " + err.message));
  page.on("dialog", (d) => { problems.push("dialog opened: " + d.message()); d.dismiss(); });
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  await page.goto(`${base}/#token=${token}`);
  await page.waitForSelector("body[data-ready='1']");
  check(!(await page.isVisible("[data-testid=stop]")), "Stop is hidden while idle");

  const input = page.locator("[data-testid=chat-input]");
  const lastCall = page.locator("[data-testid=tool-call]").last();
  const say = async (text) => { await input.fill(text); await page.click("[data-testid=send]"); };
  // The answer's own text (not a collapsed tool result that happens to contain it).
  const assistantSays = (text) =>
    page.locator("[data-testid=message][data-role=assistant] > .text", { hasText: text })
      .first().waitFor();

  // 1. Stop mid-tool: the call shows as interrupted, Stop disappears.
  await say('call slow_task {"topic": "tea"}');
  await page.waitForSelector("[data-testid=tool-call][data-status=running] .progress:has-text('step')");
  check(await page.isVisible("[data-testid=stop]"), "Stop is visible while a run is active");
  const t0 = Date.now();
  await page.click("[data-testid=stop]");
  await page.waitForSelector("[data-testid=tool-call][data-status=interrupted]", { timeout: 5000 });
  const stopMs = Date.now() - t0;
  await page.waitForSelector("[data-testid=stop]", { state: "hidden" });
  report("stopped", { stopMs });
  const stoppedThread = await page.evaluate(() => location.hash);

  // 2. The follow-up continues the conversation.
  await say("just a quick summary");
  await assistantSays("You interrupted me");
  report("follow-up answered");

  // 3. With "Interrupt instead" checked, typing while the agent works interrupts it and
  // follows up (unchecked, the default, it steers: see chat_ui_browser.mjs).
  await page.check("[data-testid=interrupt-mode]");
  await say('call slow_task {"topic": "coffee"}');
  await page.waitForSelector("[data-testid=tool-call][data-status=running] .progress:has-text('step')");
  check(await input.isEditable(), "the text box stays usable while the agent runs");
  await say("never mind, stop that");
  await assistantSays("never mind, stop that");
  check((await lastCall.getAttribute("data-status")) === "interrupted" ||
        (await page.locator("[data-testid=tool-call][data-status=interrupted]").count()) >= 2,
        "the running call was interrupted by the new message");
  await page.uncheck("[data-testid=interrupt-mode]");
  report("typed while running");

  // 3b. Reloading mid-run re-attaches to the live run; Stop still works.
  await say('call slow_task {"topic": "reload"}');
  await page.waitForSelector("[data-testid=tool-call][data-status=running] .progress:has-text('step')");
  await page.reload();
  await page.waitForSelector("body[data-ready='1']");
  await page.waitForSelector("[data-testid=tool-call][data-status=running] .progress:has-text('reload')");
  check(await page.isVisible("[data-testid=stop]"), "Stop is back after the reload");
  await page.click("[data-testid=stop]");
  await page.waitForFunction(() =>
    document.querySelectorAll("[data-testid=tool-call][data-status=interrupted]").length >= 3);
  await page.waitForSelector("[data-testid=stop]", { state: "hidden" });
  report("reload mid-run");

  // 4. Approve in one thread. Creating a thread is made slow, so the message typed right after
  // "New chat" races the switch: it must land in the new thread, not the one being left.
  await page.route("**/threads", async (route) => {
    if (route.request().method() === "POST") await new Promise((r) => setTimeout(r, 400));
    await route.continue();
  });
  await page.click("[data-testid=new-thread]");
  await say("weather in Paris and Tokyo");
  await assistantSays("Here are the results");
  await say('call delete_files {"pattern": "*.tmp"}');
  await page.waitForSelector("[data-testid=tool-call][data-status=pending] [data-testid=approve]");
  await page.screenshot({ path: screenshot });
  await page.click("[data-testid=approve]");
  await page.waitForSelector("[data-testid=tool-call][data-status=done]");
  await assistantSays("deleted files matching");
  report("approved");

  // 5. Deny in another thread.
  await page.click("[data-testid=new-thread]");
  await say('call delete_files {"pattern": "*.log"}');
  await page.click("[data-testid=tool-call][data-status=pending] [data-testid=deny]");
  await page.waitForSelector("[data-testid=tool-call][data-status=error]");
  await assistantSays("(denied)");
  report("denied");

  // 6. Hostile markup from a tool and in a call waiting next to Approve executes nothing.
  await page.click("[data-testid=new-thread]");
  await say("call markup {}");
  await page.waitForSelector("[data-testid=tool-call][data-status=done]");
  await say('call delete_files {"pattern": "<img src=x onerror=window.__xss=3><script>window.__xss=4</script>"}');
  await page.waitForSelector("[data-testid=tool-call][data-status=pending] [data-testid=approve]");
  const shown = await page.locator("#log").innerText();
  check(shown.includes("<img src=x onerror"), "hostile markup is shown as text");
  check(shown.includes("<script>"), "script tags are shown as text");
  const hostile = await page.evaluate(() => ({
    xss: window.__xss === undefined ? null : window.__xss,
    imgs: document.querySelectorAll("#log img, #log script, #log b").length,
  }));
  check(hostile.xss === null, "no injected script ran (window.__xss=" + hostile.xss + ")");
  check(hostile.imgs === 0, "no element was created from tool output");
  await page.click("[data-testid=approve]");
  await page.waitForFunction(() =>
    document.querySelectorAll("[data-testid=tool-call][data-status=done]").length === 2);
  await page.waitForSelector("[data-testid=stop]", { state: "hidden" });
  check(await page.evaluate(() => window.__xss === undefined), "still nothing ran after Approve");
  report("xss inert");

  // 7. Reload: the same history comes back from the server.
  const snapshot = async () => page.$$eval("[data-testid=message]", (nodes) =>
    nodes.map((n) => n.getAttribute("data-role") + ":" + n.querySelector(".text").textContent));
  const callStates = async () => page.$$eval("[data-testid=tool-call]",
    (nodes) => nodes.map((n) => n.getAttribute("data-status")));
  const before = [await snapshot(), await callStates()];
  await page.reload();
  await page.waitForSelector("body[data-ready='1']");
  const after = [await snapshot(), await callStates()];
  check(JSON.stringify(before) === JSON.stringify(after), "history after reload matches:\n" +
        JSON.stringify(before) + "\n" + JSON.stringify(after));
  const threads = await page.locator("[data-testid=thread]").count();
  check(threads >= 4, "the thread list shows every thread (" + threads + ")");
  await page.goto(`${base}/${stoppedThread}`);   // a hash change: the page switches threads
  await page.reload();
  await page.waitForSelector("body[data-ready='1']");
  await page.waitForSelector("[data-testid=tool-call][data-status=interrupted]");
  await assistantSays("You interrupted me");
  report("reloaded", { messages: before[0].length, threads });
  check(problems.length === 0, "no page errors: " + problems.join("; "));
} finally {
  await browser.close();
}
report("done");

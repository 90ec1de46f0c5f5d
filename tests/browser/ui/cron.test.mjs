// cron.js: a job's cron in words, its next fires against a pause, its last outcomes, the queue.
import test from "node:test";
import assert from "node:assert/strict";

import { cronText, upcoming, outcomes, untilAfter, queueText } from "../../../src/barca/server/ui/cron.js";

test("common crons in words", () => {
  const cases = {
    "* * * * *": "every minute",
    "*/5 * * * *": "every 5 minutes",
    "0 6 * * 1-5": "at 06:00 on Monday to Friday",
    "0 6 * * MON-FRI": "at 06:00 on Monday to Friday",
    "0 6 * * *": "at 06:00 every day",
    "0 6,18 * * *": "at 06:00 and 18:00 every day",
    "30 2 1 * *": "at 02:30 on day 1 of the month",
    "0 0 1,15 * *": "at 00:00 on days 1 and 15 of the month",
    "0 * * * *": "every hour, on the hour",
    "15 * * * *": "at minute 15 of every hour",
    "0 */2 * * *": "every 2 hours, on the hour",
    "30 */6 * * *": "every 6 hours at minute 30",
    "0 9-17 * * mon-fri": "every hour from 09:00 to 17:00 on Monday to Friday",
    "*/15 9-17 * * *": "every 15 minutes from 09:00 to 17:59",
    "0 0 1 1 *": "at 00:00 on 1 January",
    "0 0 * * 0": "at 00:00 on Sunday",
    "0 0 * * 7": "at 00:00 on Sunday",
    "0 0 * * 1,3,5": "at 00:00 on Monday, Wednesday and Friday",
    "0 3 * 1-3 *": "at 03:00 in January to March",
    "0 0 1 * 1": "at 00:00 on day 1 of the month or on Monday",
    "0 0 */2 * *": "at 00:00 every 2 days",
    "@daily": "at 00:00 every day",
    "@hourly": "every hour, on the hour",
    "@weekly": "at 00:00 on Sunday",
  };
  for (const [cron, words] of Object.entries(cases)) assert.equal(cronText(cron), words, cron);
});

test("six fields: seconds first", () => {
  assert.equal(cronText("*/10 * * * * *"), "every 10 seconds");
  assert.equal(cronText("30 0 6 * * *"), "at 06:00:30 every day");
  assert.equal(cronText("0 */5 * * * *"), "every 5 minutes");
  assert.equal(cronText("15 */5 * * * *"), "every 5 minutes, at second 15");
});

test("what it cannot say is null, never a wrong sentence", () => {
  for (const cron of ["0 0 L * *", "0 0 * * 5#2", "0 0 15W * *", "bad", "", "61 * * * *", "0 0 * * */2", null]) {
    assert.equal(cronText(cron), null, String(cron));
  }
});

test("a paused job skips the fires before its pause ends", () => {
  const fires = ["2026-12-07T06:00:00.000Z", "2026-12-08T06:00:00.000Z", "2026-12-09T06:00:00.000Z"];
  assert.deepEqual(upcoming(fires, { paused: false }).map((f) => f.skipped), [false, false, false]);
  assert.deepEqual(upcoming(fires, { paused: true, paused_until: null }).map((f) => f.skipped), [true, true, true]);
  assert.deepEqual(upcoming(fires, { paused: true, paused_until: "2026-12-08T12:00:00.000Z" }).map((f) => f.skipped),
    [true, true, false]);
  assert.deepEqual(upcoming(null, {}), []);
});

test("last outcomes: counts and the streak at the head", () => {
  const runs = [{ status: "running" }, { status: "failed" }, { status: "failed" }, { status: "success" }, { status: "cancelled" }];
  assert.deepEqual(outcomes(runs), { success: 1, failed: 2, other: 2, streak: { status: "failed", count: 2 } });
  assert.deepEqual(outcomes([]), { success: 0, failed: 0, other: 0, streak: null });
});

test("a pause for some hours, and the queue in a line", () => {
  assert.equal(untilAfter(1, Date.parse("2026-12-05T10:00:00Z")), "2026-12-05T11:00:00.000Z");
  assert.equal(queueText({ paused: true, max_runs: 2, running: [{}], queued: [{}, {}, {}] }), "paused · 1 running · 3 waiting (2 slots)");
  assert.equal(queueText({ paused: false, max_runs: 1, running: [], queued: [] }), "0 running · 0 waiting (1 slot)");
  assert.equal(queueText(null), "");
});

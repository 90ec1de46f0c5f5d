// A job's schedule as a person reads it: its cron in words, its next fires against a pause,
// its last outcomes. Pure: no DOM, so that `node --test` checks them (tests/browser/ui/).
//
// The cron is the one barca validates with croniter: 5 fields (minute hour day month weekday)
// or 6 with leading seconds, `*`, lists, ranges, steps, month and weekday names, and the
// `@hourly`-style nicknames. Whatever this module cannot say in words (`L`, `#`, `W`) it says
// as null: the page then shows the expression alone, never a wrong sentence.

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
  "September", "October", "November", "December"];
const DAY_NAMES = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };
const MONTH_NAMES = { jan: 1, feb: 2, mar: 3, apr: 4, may: 5, jun: 6, jul: 7, aug: 8, sep: 9, oct: 10, nov: 11, dec: 12 };
const NICKNAMES = {
  "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
};

/** "a, b and c" */
function listText(items) {
  return items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}

const pad = (n) => String(n).padStart(2, "0");

/** One field as {any, step, parts: [{from, to}]} (null: not understood). `names` maps words. */
function parseField(text, low, high, names = {}) {
  const value = (s) => {
    const t = s.toLowerCase();
    if (t in names) return names[t];
    return /^\d+$/.test(t) ? Number(t) : NaN;
  };
  if (text === "*" || text === "?") return { any: true, step: 1, parts: [] };
  const star = /^\*\/(\d+)$/.exec(text);
  if (star) return Number(star[1]) > 0 ? { any: true, step: Number(star[1]), parts: [] } : null;
  const parts = [];
  for (const piece of text.split(",")) {
    const m = /^([^-/]+)(?:-([^-/]+))?(?:\/(\d+))?$/.exec(piece);
    if (!m) return null;
    const from = value(m[1]), to = m[2] === undefined ? from : value(m[2]);
    const step = m[3] === undefined ? 1 : Number(m[3]);
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < low || to > high || step < 1) return null;
    if (m[3] !== undefined && m[2] === undefined) {
      parts.push({ from, to: high, step });  // `5/15`: from 5 on, every 15
    } else {
      parts.push({ from, to, step });
    }
  }
  return { any: false, step: 1, parts };
}

/** Every value a field of single values and plain ranges takes (null for `*` or a step). */
function values(field) {
  if (field.any) return null;
  const out = [];
  for (const p of field.parts) {
    if (p.step !== 1 && p.from !== p.to) return null;
    for (let v = p.from; v <= p.to; v++) out.push(v);
  }
  return out;
}

const every = (n, one, many = `${one}s`) => (n === 1 ? `every ${one}` : `every ${n} ${many}`);

function timeOfDay(h, m, s = 0) {
  return s ? `${pad(h)}:${pad(m)}:${pad(s)}` : `${pad(h)}:${pad(m)}`;
}

/** The part saying when in the day ({text, at}: `at` when it lists times of day). */
function timeText(sec, min, hour) {
  const secs = sec ? values(sec) : [0];
  if (!secs || secs.length > 1) {  // several times a minute: said only for every minute
    if (!(min.any && min.step === 1 && hour.any && hour.step === 1)) return null;
    return { text: secs ? `at seconds ${listText(secs.map(String))} of every minute` : every(sec.step, "second") };
  }
  const s = secs[0];
  const withSecond = (text) => ({ text: s ? `${text}, at second ${s}` : text });
  if (min.any) {
    const each = min.step === 1 ? "every minute" : every(min.step, "minute");
    if (hour.any) return hour.step === 1 ? withSecond(each) : null;
    const range = hourRange(hour);
    return range ? withSecond(`${each} ${range}`) : null;
  }
  const mins = values(min);
  if (!mins) return null;
  const m = mins.length === 1 ? `minute ${mins[0]}` : `minutes ${listText(mins.map(String))}`;
  const onTheHour = mins.length === 1 && mins[0] === 0 && !s;
  if (hour.any) {
    if (hour.step === 1) return onTheHour ? { text: "every hour, on the hour" } : withSecond(`at ${m} of every hour`);
    return onTheHour ? { text: `every ${hour.step} hours, on the hour` } : withSecond(`every ${hour.step} hours at ${m}`);
  }
  const hours = values(hour);
  if (hours && hours.length * mins.length <= 6) {
    const times = [];
    for (const h of hours) for (const mm of mins) times.push(timeOfDay(h, mm, s));
    return { text: `at ${listText(times)}`, at: true };
  }
  const p = hour.parts[0];
  if (mins.length === 1 && hour.parts.length === 1 && p.step === 1) {
    return withSecond(`every hour from ${timeOfDay(p.from, mins[0])} to ${timeOfDay(p.to, mins[0])}`);
  }
  const range = hourRange(hour);
  return range ? withSecond(`at ${m} of every hour ${range}`) : null;
}

/** A restricted hour field as "from 09:00 to 17:59", "every 2 hours from 08:00 to 18:59",
 * "during hours 6, 12 and 18". */
function hourRange(hour) {
  if (hour.parts.length === 1) {
    const p = hour.parts[0];
    if (p.from === p.to) return `during hour ${p.from}`;
    const span = `from ${timeOfDay(p.from, 0)} to ${timeOfDay(p.to, 59)}`;
    return p.step === 1 ? span : `every ${p.step} hours ${span}`;
  }
  const hs = values(hour);
  return hs ? `during hours ${listText(hs.map(String))}` : null;
}

/** A field's parts in words: "1", "1 to 5", "every 2 from 1 to 9". */
function partsText(field, name) {
  return field.parts.map((p) => {
    if (p.from === p.to) return name(p.from);
    const range = `${name(p.from)} to ${name(p.to)}`;
    return p.step === 1 ? range : `every ${p.step} from ${range}`;
  });
}

/** The part saying on which days ("" for every day); null when it cannot say. */
function dayText(dom, month, dow) {
  if ((dow.any && dow.step !== 1) || dow.parts.some((p) => p.step !== 1)) return null;
  const weekdays = dow.any ? "" : `on ${listText(partsText(dow, (v) => DAYS[v % 7]))}`;
  const doms = values(dom), months = values(month);
  if (!weekdays && doms && doms.length === 1 && months && months.length === 1) {
    return `on ${doms[0]} ${MONTHS[months[0] - 1]}`;
  }
  let days = "";
  if (!dom.any) {
    const one = doms && doms.length === 1;
    days = `on day${one ? "" : "s"} ${listText(partsText(dom, String))} of the month`;
  } else if (dom.step !== 1) {
    days = every(dom.step, "day");
  }
  // given both, cron fires on a day that matches either
  const out = [days && weekdays ? `${days} or ${weekdays}` : days || weekdays];
  if (!month.any) out.push(`in ${listText(partsText(month, (v) => MONTHS[v - 1]))}`);
  else if (month.step !== 1) out.push(every(month.step, "month"));
  return out.filter(Boolean).join(", ");
}

/** A cron expression in words ("at 06:00 on Monday to Friday"); null when it cannot say. */
export function cronText(expr) {
  if (typeof expr !== "string") return null;
  let text = expr.trim().toLowerCase();
  text = NICKNAMES[text] || text;
  const fields = text.split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) return null;
  const [secText, ...rest] = fields.length === 6 ? fields : [null, ...fields];
  const sec = secText === null ? null : parseField(secText, 0, 59);
  const min = parseField(rest[0], 0, 59);
  const hour = parseField(rest[1], 0, 23);
  const dom = parseField(rest[2], 1, 31);
  const month = parseField(rest[3], 1, 12, MONTH_NAMES);
  const dow = parseField(rest[4], 0, 7, DAY_NAMES);
  if ((secText !== null && !sec) || !min || !hour || !dom || !month || !dow) return null;
  const time = timeText(sec, min, hour);
  const days = dayText(dom, month, dow);
  if (time === null || days === null) return null;
  if (!days) return time.at ? `${time.text} every day` : time.text;
  return `${time.text} ${days}`;
}

/** The next fires, each {at, skipped}: a paused job skips those before its pause ends (all
 * of them when paused until resumed). */
export function upcoming(nextFires, job = {}) {
  const until = job.paused_until ? Date.parse(job.paused_until) : null;
  return (nextFires || []).map((at) => ({
    at, skipped: !!job.paused && (until === null || Date.parse(at) < until),
  }));
}

/** The last outcomes (runs, newest first) as counts and the run of the same status at the
 * head: {success, failed, other, streak: {status, count}}. */
export function outcomes(runs) {
  const out = { success: 0, failed: 0, other: 0, streak: null };
  for (const r of runs || []) {
    if (r.status === "success") out.success++;
    else if (r.status === "failed") out.failed++;
    else out.other++;
  }
  const ended = (runs || []).filter((r) => r.status !== "running" && r.status !== "pending");
  if (ended.length) {
    let n = 0;
    while (n < ended.length && ended[n].status === ended[0].status) n++;
    out.streak = { status: ended[0].status, count: n };
  }
  return out;
}

/** A moment `hours` from `now`, as `?until=` takes it (RFC 3339, UTC). */
export function untilAfter(hours, now = Date.now()) {
  return new Date(now + hours * 3600 * 1000).toISOString();
}

/** The run queue in a line: "paused · 1 running · 3 waiting (2 slots)". */
export function queueText(queue) {
  if (!queue) return "";
  const running = (queue.running || []).length, waiting = (queue.queued || []).length;
  const parts = [];
  if (queue.draining) parts.push("shutting down");
  else if (queue.paused) parts.push("paused");
  parts.push(`${running} running`, `${waiting} waiting`);
  const slots = queue.max_runs ? ` (${queue.max_runs} slot${queue.max_runs === 1 ? "" : "s"})` : "";
  return parts.join(" · ") + slots;
}

"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.RunLost = void 0;
exports.nextDue = nextDue;
exports.schedule = schedule;
const errors_js_1 = require("./errors.js");
const connect_js_1 = require("./connect.js");
const lease_js_1 = require("./lease.js");
const load_js_1 = require("./load.js");
const options_js_1 = require("./options.js");
const statements_js_1 = require("./statements.js");
// Instants are whole microseconds since the epoch here (a registered
// schedule's may have any): they come from the server as text and go to it
// as ISO 8601 text with 6 fractional digits (exact, whatever pg's Date
// settings and type parsers); terms come back as text and go as text
// (bigint, exact).
/** The lease clock, in microseconds since the epoch: a due instant at or before it is due on the server too. */
const LE_NOW_US = "SELECT (extract(epoch FROM @extschema@.le_now()) OPERATOR(pg_catalog.*) 1000000)::bigint::pg_catalog.text AS us";
/**
 * Contract 24: job $1's registered schedule's first due instant strictly after $2 (NULL: no schedule, or
 * paused), in microseconds since the epoch, its misfire grace in seconds (NULL: none), and the missed instants
 * its backfill lets run late (microseconds, oldest first).
 */
const NEXT_DUE = "SELECT (extract(epoch FROM d.due) OPERATOR(pg_catalog.*) 1000000)::bigint::pg_catalog.text AS due, " +
    "(SELECT pg_catalog.date_part('epoch'::pg_catalog.text, s.misfire_grace) FROM @extschema@.leaderlock_schedules s " +
    "WHERE s.job OPERATOR(pg_catalog.=) $1) AS grace, " +
    "ARRAY(SELECT (extract(epoch FROM bd) OPERATOR(pg_catalog.*) 1000000)::bigint::pg_catalog.text " +
    "FROM @extschema@.le_backfill_due(job => $1) AS bd) AS late " +
    "FROM (SELECT @extschema@.le_next_due(job => $1, after => $2::pg_catalog.timestamptz) AS due) d";
const CLAIM_RUN = "SELECT @extschema@.le_claim_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, " +
    "ttl => pg_catalog.make_interval(secs => $4), misfire_grace => pg_catalog.make_interval(secs => $5))::pg_catalog.text AS term";
const RENEW_RUN = "SELECT @extschema@.le_renew_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, " +
    "ttl => pg_catalog.make_interval(secs => $4), term => $5::bigint) AS ok";
const FINISH_RUN = "SELECT @extschema@.le_finish_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, term => $4::bigint, " +
    "succeeded => $5, detail => $6) AS ok";
/** After a refused claim: finished (or missed)? seconds until its live claim ends (NULL: none live), its outcome. */
const RUN_STATE = "SELECT r.finished_at IS NOT NULL AS finished, " +
    "CASE WHEN r.holder IS NOT NULL AND r.expires_at OPERATOR(pg_catalog.>) n.now " +
    "THEN extract(epoch FROM r.expires_at OPERATOR(pg_catalog.-) n.now)::pg_catalog.float8 END AS remaining, " +
    "r.outcome FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n " +
    "WHERE r.job OPERATOR(pg_catalog.=) $1 AND r.due OPERATOR(pg_catalog.=) $2::pg_catalog.timestamptz";
/** A run whose row a refused claim cannot find this many times in a row is given up (older than the retention). */
const ABSENT_TRIES = 100;
/** Looks again every RACE_RETRY this many times before backing off. */
const FAST_TRIES = 10;
/** How soon a run is looked at again after a claim raced this one, or found no row. */
const RACE_RETRY = 20;
/** le_finish_run keeps at most this many bytes of detail. */
const DETAIL_MAX_BYTES = 1000;
/** Without misfireGraceMs, a cron schedule's misfire grace (as `leaderlock run --cron`). */
const CRON_GRACE = 5 * 60_000;
/** A wait for the next due instant re-reads the server's clock at least this often. */
const MAX_WAIT = 10_000;
/** A run is no longer this replica's (see `reason`, as LeaseLost's; `key` is the job). `term` is the run's term as a number; `runTerm` exact. */
class RunLost extends errors_js_1.LeaseLost {
    job;
    due;
    runTerm;
    constructor(job, due, runTerm, reason, detail, options) {
        super(job, Number(runTerm), reason, detail, options);
        this.job = job;
        this.due = due;
        this.runTerm = runTerm;
        this.message = `lost the run of ${JSON.stringify(job)} due ${due.toISOString()} (term ${runTerm}): ${detail}`;
    }
}
exports.RunLost = RunLost;
// ------------------------------------------------ due instants
let cronModule;
/**
 * cron-parser, loaded when a cron schedule is first asked for: a dependency
 * of this package, which npm does not install for a folder installed as a
 * link (then found in the application, as pg).
 */
function cronParser() {
    cronModule ??= (0, load_js_1.requireHereOrInApp)("cron-parser");
    if (!cronModule?.CronExpressionParser) {
        cronModule = undefined;
        throw new errors_js_1.BadArgumentError("a cron schedule needs the package cron-parser 5.x, a dependency of leaderlock that npm does " +
            "not install for a folder installed as a link: npm install cron-parser@5.10.6 in your " +
            "application, or install leaderlock with npm install --install-links");
    }
    return cronModule;
}
/** Wall-clock formatters by time zone. */
const walls = new Map();
function wallFormat(tz) {
    let f = walls.get(tz);
    if (!f) {
        try {
            f = new Intl.DateTimeFormat("en-US", {
                timeZone: tz, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric",
                hour: "numeric", minute: "numeric", second: "numeric",
            });
        }
        catch (e) {
            throw new errors_js_1.BadArgumentError(`time zone ${JSON.stringify(tz)}: ${e.message}`);
        }
        walls.set(tz, f);
    }
    return f;
}
/** The wall-clock time in `tz` at instant `t` (whole seconds), as ms since the epoch of a UTC clock showing it. */
function wallAt(tz, t) {
    const p = {};
    for (const part of wallFormat(tz).formatToParts(new Date(Math.floor(t / 1000) * 1000))) {
        if (part.type !== "literal")
            p[part.type] = Number(part.value);
    }
    return Date.UTC(p.year, p.month - 1, p.day, p.hour % 24, p.minute, p.second);
}
/** The offset from UTC in `tz` at instant `t` (ms; whole seconds). */
function offsetAt(tz, t) {
    return wallAt(tz, t) - Math.floor(t / 1000) * 1000;
}
/** The instants at which `tz` shows wall-clock time `wall` (whole seconds): none (skipped forward), one, or two (set back), in order. */
function instantsAt(tz, wall) {
    const day = 86_400_000;
    const offsets = new Set([offsetAt(tz, wall - day), offsetAt(tz, wall), offsetAt(tz, wall + day)]);
    const found = [...offsets].map((o) => wall - o).filter((t) => offsetAt(tz, t) === wall - t);
    return [...new Set(found)].sort((a, b) => a - b);
}
function everyRule(period) {
    if (!(typeof period === "number" && Number.isSafeInteger(period) && period >= 1)) {
        throw new errors_js_1.BadArgumentError(`every must be a whole number of milliseconds, at least 1 (got ${period})`);
    }
    return { nextAfter: (t) => (Math.floor(t / period) + 1) * period };
}
/**
 * A cron schedule in a time zone, with the Rust client's rule across
 * daylight saving changes (the cron crate's): the expression is matched
 * against wall-clock times, in order; a wall-clock time that does not exist
 * is skipped, and one that occurs twice is due once, at the first.
 */
function cronRule(expr, tz) {
    if (typeof expr !== "string" || expr.trim() === "")
        throw new errors_js_1.BadArgumentError("cron must be a non-empty string");
    const zone = tz ?? "UTC";
    if (typeof zone !== "string" || zone === "")
        throw new errors_js_1.BadArgumentError("tz must be a non-empty string");
    wallFormat(zone);
    // Refused, so that every client reads an expression alike: what cron implementations read differently
    // or not at all.
    const refuse = (why) => new errors_js_1.BadArgumentError(`cron expression ${JSON.stringify(expr)}: ${why}`);
    let fields = expr.trim().split(/\s+/);
    if (fields.length !== 5 && fields.length !== 6) {
        throw refuse("five fields (minute hour day-of-month month day-of-week), or six with seconds first");
    }
    if (fields.length === 5)
        fields = ["0", ...fields]; // five fields: minutes first (seconds 0)
    // `?` is `*` (a day-of-month or day-of-week left open)
    fields = fields.map((f, i) => (f === "?" && (i === 3 || i === 5) ? "*" : f));
    const [, , , dom, , dow] = fields;
    if (dom !== "*" && dow !== "*") {
        throw refuse("restrict the day of the month or the day of the week, not both (cron implementations combine them differently)");
    }
    for (const item of dow.split(",")) {
        if (/\d/.test(item.split("/")[0]))
            throw refuse("name the days of the week (MON-FRI, SUN): cron implementations number them differently");
    }
    // H: hashed values, different in each process (replicas would disagree); L, W, #: not every client has them
    if (fields.some((f) => /(^|[,\-/(])H(?=$|[,\-/(])/.test(f)) || /[LW#]/i.test(dom) || /[L#]/i.test(dow)) {
        throw refuse("no H, L, W or # (replicas and clients must compute the same instants)");
    }
    let cron;
    try {
        cron = cronParser().CronExpressionParser.parse(fields.join(" "), { tz: "UTC", strict: true, currentDate: new Date(0) });
    }
    catch (e) {
        if (e instanceof errors_js_1.LeaderlockError)
            throw e;
        throw new errors_js_1.BadArgumentError(`cron expression ${JSON.stringify(expr)}: ${e?.message ?? e}`);
    }
    return {
        nextAfter(t) {
            // Wall-clock times from the one a second after t (whole seconds) on, as the cron crate's; each
            // maps to its first instant, which grows with it; the first instant after t is the answer.
            const from = wallAt(zone, t + 1000);
            try {
                cron.reset(new Date(from - 1000));
                for (let i = 0; i < 200_000; i++) {
                    const wall = cron.next().getTime();
                    const first = instantsAt(zone, wall)[0];
                    if (first !== undefined && first > t)
                        return first;
                }
            }
            catch {
                // no further match (cron-parser's range or loop limit)
            }
            return null;
        },
    };
}
function ruleOf(when) {
    const every = when.every !== undefined && when.every !== null;
    const cron = when.cron !== undefined && when.cron !== null;
    if (every === cron) {
        throw new errors_js_1.BadArgumentError("give either every (ms) or cron (to schedule(): neither, for the job's schedule kept in the database)");
    }
    if (every) {
        if (when.tz != null)
            throw new errors_js_1.BadArgumentError("tz applies to cron only");
        return everyRule(when.every);
    }
    return cronRule(when.cron, when.tz);
}
/**
 * The first due instant of `when` strictly after `after`, or null when
 * there is none. What every replica computes alike (with `every`: the
 * next multiple of the period since the Unix epoch).
 */
function nextDue(when, after) {
    const t = after.getTime();
    if (Number.isNaN(t))
        throw new errors_js_1.BadArgumentError("after must be a valid Date");
    const next = ruleOf(when).nextAfter(t);
    return next === null ? null : new Date(next);
}
/** `t`'s first due instant at or after it (instants are whole milliseconds). */
function atOrAfter(rule, t) {
    return rule.nextAfter(Math.ceil(t) - 1);
}
/** Instant `us` (microseconds since the epoch, a whole number) as ISO 8601 text with 6 fractional digits. */
function isoOfMicros(us) {
    const ms = Math.floor(us / 1000);
    return new Date(ms).toISOString().replace(/Z$/, `${String(us - ms * 1000).padStart(3, "0")}Z`);
}
// ------------------------------------------------ the run
/** What to record of a rejection: its name and message, at most DETAIL_MAX_BYTES of UTF-8, no NUL (text cannot hold one). */
function detailOf(e) {
    let text;
    try {
        text = e instanceof Error ? `${e.name}: ${e.message}` : `rejected with ${String(e)}`;
    }
    catch {
        text = "rejected with a value that has no text";
    }
    return truncateUtf8(text.replace(/\0/g, "\uFFFD"), DETAIL_MAX_BYTES);
}
/** `s` cut to at most `max` bytes of UTF-8, at a character's boundary (lone surrogates become U+FFFD). */
function truncateUtf8(s, max) {
    const bytes = Buffer.from(s, "utf8");
    if (bytes.length <= max)
        return bytes.toString("utf8");
    let end = max;
    while (end > 0 && (bytes[end] & 0xc0) === 0x80)
        end--; // bytes[end] continues a character: cut before its start
    return bytes.subarray(0, end).toString("utf8");
}
class ClaimedRun {
    job;
    id;
    due;
    term;
    deadline;
    controller = new AbortController();
    watchdog;
    constructor(job, id, due, term, deadline) {
        this.job = job;
        this.id = id;
        this.due = due;
        this.term = term;
        this.deadline = deadline;
        (0, lease_js_1.readsTheClock)(this.controller.signal, () => this.expireIfDue());
        this.arm();
    }
    get signal() { return this.controller.signal; }
    get lost() { return lease_js_1.abortedOf.call(this.controller.signal); }
    expireIfDue() {
        if (!this.lost && (0, options_js_1.now)() >= this.deadline)
            this.lose("deadline", "no renewal succeeded before the local deadline");
    }
    isOurs() {
        this.expireIfDue();
        return !this.lost;
    }
    get remaining() { return this.isOurs() ? Math.max(0, this.deadline - (0, options_js_1.now)()) : 0; }
    check() {
        if (!this.isOurs())
            throw lease_js_1.reasonOf.call(this.controller.signal);
    }
    lose(reason, detail, cause) {
        if (!this.lost) {
            this.controller.abort(new RunLost(this.job, this.due, this.term, reason, detail, cause === undefined ? undefined : { cause }));
        }
        clearTimeout(this.watchdog);
    }
    /** A renewal sent at `sent` succeeded: the deadline moves (never for a run already lost). */
    extend(deadline) {
        if (!this.isOurs())
            return;
        this.deadline = deadline;
        this.arm();
    }
    arm() {
        clearTimeout(this.watchdog);
        this.watchdog = (0, options_js_1.later)(() => {
            this.expireIfDue();
            if (!this.lost)
                this.arm();
        }, Math.max(0, this.deadline - (0, options_js_1.now)()));
    }
}
/**
 * Claims the runs of one job as they come due (the Rust Scheduler's next()), on one connection it reopens when
 * it fails. Instants in microseconds since the epoch. `rule` null: the job's schedule kept in the database.
 */
class Claimer {
    config;
    schema;
    job;
    id;
    rule;
    t;
    grace;
    poll;
    conn = null;
    /** The next due instant not yet looked at; a registered schedule: the last one made pending (null: start from now less its grace). */
    cursor = undefined;
    /** Due runs not settled yet: when to look at each again (performance.now()), how often it was found without a row. */
    pending = new Map();
    /** A registered schedule: whether it was found at the last look (null: not looked yet). */
    found = null;
    /** Told when a registered schedule goes absent or paused (false), and when it runs again (true). */
    onFound = undefined;
    constructor(config, schema, job, id, rule, t, grace, poll) {
        this.config = config;
        this.schema = schema;
        this.job = job;
        this.id = id;
        this.rule = rule;
        this.t = t;
        this.grace = grace;
        this.poll = poll;
    }
    /** One statement, bounded by the call timeout (and `until`); a connection that failed or timed out is dropped. */
    async query(text, values, until = Infinity) {
        const by = Math.min((0, options_js_1.now)() + this.t.callTimeout, until);
        try {
            this.conn ??= await (0, connect_js_1.connect)(this.config, this.schema, by - (0, options_js_1.now)());
            return await (0, connect_js_1.bounded)(this.conn, by, text, values);
        }
        catch (e) {
            const err = (0, errors_js_1.classify)(e, this.conn?.database ?? (0, connect_js_1.databaseOf)(this.config));
            if (err instanceof errors_js_1.ConnectionError) {
                (0, connect_js_1.drop)(this.conn);
                this.conn = null;
            }
            throw err;
        }
    }
    close() {
        (0, connect_js_1.drop)(this.conn);
        this.conn = null;
    }
    /** Waits until a due run is claimed by this replica or settled; null when `stop` aborts. Throws LeaderlockErrors. */
    async next(stop) {
        for (;;) {
            if (stop?.aborted)
                return null;
            const serverNow = Number((await this.query(LE_NOW_US, []))[0].us);
            const here = (0, options_js_1.now)();
            const next = this.rule === null ? await this.makeRegisteredPending(serverNow, here) : this.makePending(this.rule, serverNow, here);
            let ready;
            for (const [due, p] of this.pending) {
                if (p.at <= here && (ready === undefined || due < ready))
                    ready = due;
            }
            if (ready === undefined) {
                // a registered schedule is read again every poll: a change or a pause is followed without a restart
                const most = this.rule === null ? this.poll : MAX_WAIT;
                let wait = next === null ? most : (next - serverNow) / 1000;
                for (const p of this.pending.values())
                    wait = Math.min(wait, p.at - here);
                await (0, options_js_1.pause)(Math.min(Math.max(wait, 0), most), stop); // then read the server's clock again
                continue;
            }
            const turn = await this.lookAt(ready);
            if (turn)
                return turn;
        }
    }
    /** Makes every due instant up to `serverNow` pending (looking back one misfire grace at the start); the next one after it. */
    makePending(rule, serverNow, here) {
        if (this.cursor === undefined) {
            const first = atOrAfter(rule, serverNow / 1000 - (this.grace ?? 0));
            if (first === null)
                throw new errors_js_1.BadArgumentError("the schedule has no due instant");
            this.cursor = first * 1000;
        }
        while (this.cursor !== null && this.cursor <= serverNow) {
            if (!this.pending.has(this.cursor))
                this.pending.set(this.cursor, { at: here, tries: 0 });
            const next = rule.nextAfter(this.cursor / 1000);
            this.cursor = next === null ? null : next * 1000;
        }
        return this.cursor;
    }
    /** Says once that a registered schedule was found absent or paused, and once that it runs again. */
    tell(found) {
        if (this.found !== found && !(found && this.found === null))
            this.onFound?.(found);
        this.found = found;
    }
    /**
     * makePending for the job's schedule kept in the database: the instants come from the server (le_next_due),
     * after the last one made pending, or after now less the schedule's misfire grace at the start. null while
     * the job has no schedule or it is paused (then looked at from the start again: no instant of the pause is
     * ever claimed past its grace).
     */
    async makeRegisteredPending(serverNow, here) {
        let from = this.cursor ?? null;
        for (;;) {
            const row = (await this.query(NEXT_DUE, [this.job, isoOfMicros(from ?? serverNow)]))[0];
            // missed instants the backfill lets run late: claimed as any due run (the server decides, each once)
            for (const late of (row?.late ?? [])) {
                const due = Number(late);
                if (!this.pending.has(due))
                    this.pending.set(due, { at: here, tries: 0 });
            }
            if (row?.due === null || row?.due === undefined) {
                this.cursor = null;
                this.tell(false);
                return null;
            }
            this.tell(true);
            const next = Number(row.due);
            // Back one misfire grace at the first look (none: from now), and never further: after a change to a
            // shorter period, the instants since the last one made pending are past their grace (the server
            // refuses them all).
            const grace = row.grace === null ? 0 : Math.max(Number(row.grace), 0);
            const back = serverNow - Math.round(grace * 1e6) - 1;
            if (from === null || (next <= back && from < back)) {
                from = back;
                continue;
            }
            if (next > serverNow)
                return next;
            if (!this.pending.has(next))
                this.pending.set(next, { at: here, tries: 0 });
            this.cursor = from = next;
        }
    }
    /** Tries to claim the run due at `due`: a turn, or null when it is to be looked at again later. */
    async lookAt(due) {
        const iso = isoOfMicros(due);
        const sent = (0, options_js_1.now)();
        // a registered schedule: NULL, the server applies the schedule's misfire grace
        const rows = await this.query(CLAIM_RUN, [this.job, iso, this.id, this.t.ttl, this.grace === null ? null : this.grace / 1000]);
        const term = rows[0]?.term;
        if (term !== null && term !== undefined) {
            this.pending.delete(due);
            return { run: true, due, term: BigInt(term), sent };
        }
        const state = (await this.query(RUN_STATE, [this.job, iso]))[0];
        const here = (0, options_js_1.now)();
        if (state?.finished) {
            this.pending.delete(due);
            return { run: false, due, outcome: state.outcome ?? null };
        }
        if (state) {
            // claimed live by another: look again when it may have finished or lapsed; not live: a claim raced this one
            const remaining = state.remaining === null ? null : Number(state.remaining);
            const wait = remaining === null ? RACE_RETRY : Math.min(Math.max(remaining * 1000, 0), this.poll) + RACE_RETRY;
            this.pending.set(due, { at: here + wait, tries: 0 });
            return null;
        }
        const tries = (this.pending.get(due)?.tries ?? 0) + 1;
        if (tries >= ABSENT_TRIES) {
            this.pending.delete(due);
            return { run: false, due, outcome: null };
        }
        // refused before its row was made (its job's row taken, the failover step not taken yet, or due before the
        // retention): every 20 ms FAST_TRIES times, then backing off, doubling up to the poll, given up after
        // ABSENT_TRIES (about a minute and a half)
        const back = tries <= FAST_TRIES ? 0 : Math.min(tries - FAST_TRIES, 10);
        this.pending.set(due, { at: here + Math.min(RACE_RETRY * 2 ** back, Math.max(this.poll, RACE_RETRY)), tries });
        return null;
    }
    /** Runs `fn` for a claimed run: renews every ttl/3 until it settles, then records its outcome (tried even past the deadline). */
    async runOne(turn, fn, stop) {
        const t = this.t;
        const due = new Date(Math.floor(turn.due / 1000));
        const iso = isoOfMicros(turn.due);
        const run = new ClaimedRun(this.job, this.id, due, turn.term, turn.sent + t.ttl * 1000 - t.margin);
        let over = false;
        let timer;
        let renewing;
        const renewAt = (at) => {
            if (!over)
                timer = (0, options_js_1.later)(() => { renewing = renew(); }, at - (0, options_js_1.now)());
        };
        const renew = async () => {
            if (over || !run.isOurs())
                return;
            const start = (0, options_js_1.now)();
            try {
                const sent = (0, options_js_1.now)();
                const rows = await this.query(RENEW_RUN, [this.job, iso, this.id, t.ttl, String(turn.term)], run.deadline);
                if (rows[0]?.ok) {
                    run.extend(sent + t.ttl * 1000 - t.margin);
                    return renewAt(sent + t.renewEvery);
                }
                run.lose("refused", "the server refused the renewal (the claim lapsed and was taken, or the run is finished)");
            }
            catch (e) {
                if (e instanceof errors_js_1.ConnectionError)
                    return renewAt(start + t.retryEvery); // until the deadline
                run.lose("rejected", `a renewal was refused for good: ${e.message}`, e);
            }
        };
        const onStop = () => run.lose("released", "the schedule was stopped");
        stop?.addEventListener("abort", onStop);
        if (stop?.aborted)
            onStop();
        renewAt(turn.sent + t.renewEvery);
        let succeeded;
        let detail = null;
        try {
            await fn(run);
            // returning after the run was lost (stopped at its deadline, taken over, the schedule stopped) is no success
            succeeded = run.isOurs();
            if (!succeeded) {
                const lost = lease_js_1.reasonOf.call(run.signal);
                detail = truncateUtf8(`returned after the run was lost: ${lost?.message ?? "deadline"}`.replace(/\0/g, "\uFFFD"), DETAIL_MAX_BYTES);
            }
        }
        catch (e) {
            succeeded = false;
            detail = detailOf(e);
        }
        finally {
            over = true;
            clearTimeout(timer);
            stop?.removeEventListener("abort", onStop);
        }
        await renewing;
        run.lose("released", "the run is over");
        for (let tries = 1;; tries++) {
            try {
                await this.query(FINISH_RUN, [this.job, iso, this.id, String(turn.term), succeeded, detail]);
                return; // false: claimed again since (this claim lapsed and another took it)
            }
            catch (e) {
                if (!(e instanceof errors_js_1.ConnectionError) || tries >= 3) {
                    if (e instanceof errors_js_1.ConnectionError)
                        return; // unrecorded: the claim lapses, and the run may be claimed again
                    throw e;
                }
                await (0, options_js_1.pause)(t.retryEvery);
            }
        }
    }
}
/**
 * Runs `fn` once per due instant of a schedule (`every` ms, or `cron` in
 * `tz`; neither: the job's schedule kept in the database, le_schedule, whose
 * changes and pauses are followed within `pollMs`), on one replica among
 * all those that schedule `job` alike, until `options.signal` aborts (then
 * resolves). Each run is claimed on the
 * server with a fencing term and handed to `fn` as a Run: act only while
 * `run.isOurs()` (or `run.check()`), and fence side effects with
 * `run.term`. It is renewed every ttl/3 while `fn` runs; `fn` resolving
 * records the run succeeded (failed, if the run was lost by then), rejecting
 * records it failed with the error's name and message (the schedule goes on). Waiting survives the connection
 * (reconnects with jittered backoff); rejects with a RejectedError
 * (NotInstalledError, PrivilegeError, BadArgumentError) at once.
 */
async function schedule(config, job, options, fn) {
    (0, options_js_1.checkName)("job", job);
    if (typeof fn !== "function")
        throw new errors_js_1.BadArgumentError("fn must be a function");
    const id = options.id === undefined ? (0, options_js_1.defaultId)() : (0, options_js_1.checkName)("id", options.id);
    // neither every nor cron: the job's schedule kept in the database
    const registered = options.every == null && options.cron == null;
    if (registered && options.tz != null)
        throw new errors_js_1.BadArgumentError("tz applies to cron only");
    if (registered && options.misfireGraceMs !== undefined) {
        throw new errors_js_1.BadArgumentError("misfireGraceMs: a schedule kept in the database has its own misfire grace (le_schedule)");
    }
    const rule = registered ? null : ruleOf(options);
    const ttlMs = options.ttlMs;
    if (!(typeof ttlMs === "number" && ttlMs > 0 && Number.isFinite(ttlMs))) {
        throw new errors_js_1.BadArgumentError(`ttlMs must be a positive number of milliseconds, not ${ttlMs}`);
    }
    let grace;
    if (registered)
        grace = null; // the claims send NULL: the server applies the schedule's
    else if (options.misfireGraceMs === undefined)
        grace = options.every != null ? options.every : CRON_GRACE;
    else
        grace = options.misfireGraceMs;
    if (grace !== null && !(typeof grace === "number" && grace >= 0 && Number.isFinite(grace))) {
        throw new errors_js_1.BadArgumentError(`misfireGraceMs must be at least 0, or null, not ${grace}`);
    }
    const poll = options.pollMs ?? 1000;
    if (!(typeof poll === "number" && poll > 0 && Number.isFinite(poll))) {
        throw new errors_js_1.BadArgumentError(`pollMs must be a positive number of milliseconds, not ${poll}`);
    }
    const stop = options.signal;
    const claimer = new Claimer(config, (0, statements_js_1.schemaOf)(options.schema), job, id, rule, (0, options_js_1.timing)({ ttl: ttlMs / 1000 }), grace, poll);
    if (options.onScheduleFound !== undefined) {
        if (typeof options.onScheduleFound !== "function")
            throw new errors_js_1.BadArgumentError("onScheduleFound must be a function");
        if (!registered)
            throw new errors_js_1.BadArgumentError("onScheduleFound applies to a schedule kept in the database (neither every nor cron)");
        claimer.onFound = options.onScheduleFound;
    }
    let failures = 0;
    try {
        while (!stop?.aborted) {
            let turn;
            try {
                turn = await claimer.next(stop);
                failures = 0;
            }
            catch (e) {
                const err = (0, errors_js_1.classify)(e, (0, connect_js_1.databaseOf)(config));
                if (!(err instanceof errors_js_1.ConnectionError))
                    throw err;
                await (0, options_js_1.pause)((0, options_js_1.backoff)(failures++), stop); // the next call connects again
                continue;
            }
            if (turn === null)
                break;
            if (turn.run)
                await claimer.runOne(turn, fn, stop);
        }
    }
    finally {
        claimer.close();
    }
}

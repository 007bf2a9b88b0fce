package leaderlock

// The history of transitions (contract 23): a HistoryWatcher delivers each
// transition after a position once, in position order, and when its
// connection is lost it connects again and goes on after the last one
// delivered, so that none is missed or repeated. The server numbers
// transitions in commit order shortly after they commit (its worker), and
// says so on channel leaderlock_history. Any role may notify there: a
// notification only makes the watcher read le_history now (never sooner
// than historyReadGap after the previous read); what it delivers is what
// le_history returns. It also reads every poll interval, in case a
// notification is lost. The Rust client's HistoryWatcher
// (crates/client/src/history.rs) follows the same rules.

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	mathrand "math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// One page of transitions after $1, with the last position numbered in
	// the same snapshot (one statement; both functions are STABLE): when
	// the page is short, every transition the filter selects up to it has
	// been read. No transition: one row, of NULLs but head.
	sqlHistory = `SELECT h."position", h.at, h.event, h.key, h.holder, h.term, ` +
		`h.role::pg_catalog.text, h.payload::pg_catalog.text, p.head ` +
		`FROM (SELECT @extschema@.le_history_position() AS head) p ` +
		`LEFT JOIN @extschema@.le_history(after => $1, for_key => $2, key_prefix => $3, max_rows => $4) h ON true ` +
		`ORDER BY h."position"`
	sqlHistoryPosition = "SELECT @extschema@.le_history_position()"
	sqlListenHistory   = "LISTEN leaderlock_history"
	historyChannel     = "leaderlock_history"
	// historyPage: rows per read.
	historyPage = 1000
	// historyReadGap: the least time between the start of two reads that
	// a notification or the poll asks for, however many notifications
	// arrive (a read that follows a full page does not wait).
	historyReadGap = 50 * time.Millisecond
	// historyCallTimeout bounds each call, and each connection attempt
	// unless the DSN sets connect_timeout.
	historyCallTimeout = 10 * time.Second
	// The delay before connecting again doubles from the first to the
	// last (each drawn in its upper half), and starts over after a read.
	historyBackoffFirst = 100 * time.Millisecond
	historyBackoffLast  = 5 * time.Second
)

// ErrWatcherClosed: HistoryWatcher.Next after (or during) Close.
var ErrWatcherClosed = errors.New("leaderlock: the history watcher is closed")

// HistoryOptions of WatchHistory.
type HistoryOptions struct {
	// Since: deliver the transitions after this position (a Position()
	// kept from an earlier watcher, or a Transition's). Nil: those numbered
	// after the watcher's first connection (le_history_position() then).
	// 0 is the start of the history, while nothing was pruned.
	Since *int64
	// Key: only this key's transitions (a job's, for runs). KeyPrefix:
	// only those of the keys starting with it. Not both; "" for all.
	Key, KeyPrefix string
	// PollInterval: how often to read without a notification; default 1 s,
	// at least 50 ms.
	PollInterval time.Duration
	// Logf, when not nil, gets one line per lost connection (with the delay
	// before the next attempt and the position it resumes after) and per
	// error that stops the watcher.
	Logf func(format string, args ...interface{})
	// Schema names the schema that holds leaderlock's functions, as
	// Config.Schema; default the environment variable LEADERLOCK_SCHEMA.
	Schema string
}

// Transition is one row of the history.
type Transition struct {
	// Position only grows, in commit order: resume after it.
	Position int64
	// At: when it happened, on the server's lease clock.
	At time.Time
	// Event: acquired, released, expired, proclaimed, run_claimed,
	// run_finished or run_missed.
	Event string
	// Key is the lease's key, or the run's job; Holder the holder (or the
	// run's claimant); Term the term. "" and 0 where the server has none.
	Key, Holder string
	Term        int64
	// Role: the role whose call made it; "" for the server's worker.
	Role string
	// Payload: the JSON notification that announced it.
	Payload json.RawMessage
}

// HistoryWatcher follows the history of transitions; see WatchHistory.
// Next is for one goroutine at a time (calls wait for each other);
// Position and Close may be called from any goroutine.
type HistoryWatcher struct {
	opts     HistoryOptions
	connCfg  *pgx.ConnConfig
	ext      *extSchema // where leaderlock is, found on each new connection
	poll     time.Duration
	position atomic.Int64 // every selected transition up to it delivered
	hinted   atomic.Bool  // a notification since the last read
	number   atomic.Bool  // no worker numbers the history: le_expire_lapsed() before each read
	done     chan struct{}
	close    sync.Once

	mu       sync.Mutex // held by Next; guards what follows
	conn     *pgx.Conn  // nil: connect first
	ready    []Transition
	head     int64 // when ready drains: the position read through
	due      bool  // read now: connected, or a full page read
	lastRead time.Time
	nextPoll time.Time
	retryAt  time.Time      // no connection attempt before
	delay    time.Duration  // the backoff's current step; 0: none
	rand     *mathrand.Rand // draws each delay
	err      error          // what stopped the watcher
}

// WatchHistory connects and starts following the history (contract 23):
// Next returns each transition after opts.Since (nil: after the last one
// numbered now), once, in position order. ctx bounds this first
// connection only. Bad options (Key and KeyPrefix both, a negative Since
// or PollInterval, a malformed dsn) match ErrBadArgument before anything
// connects; a refusal for good from the server is an *Error, as for Run
// (ErrNotInstalled, ErrPrivilege); other errors (unreachable) are worth
// retrying. Connections are named "leaderlock watch" unless the dsn sets
// application_name.
func WatchHistory(ctx context.Context, dsn string, opts HistoryOptions) (*HistoryWatcher, error) {
	if opts.Key != "" && opts.KeyPrefix != "" {
		return nil, badArgument("give Key or KeyPrefix, not both")
	}
	if opts.Since != nil && *opts.Since < 0 {
		return nil, badArgument("Since must be 0 or a history position (got %d)", *opts.Since)
	}
	if opts.PollInterval < 0 {
		return nil, badArgument("PollInterval must be positive (got %v)", opts.PollInterval)
	}
	connCfg, err := parseConnString(dsn, "leaderlock watch")
	if err != nil {
		return nil, err
	}
	var seed [8]byte
	_, _ = cryptorand.Read(seed[:])
	w := &HistoryWatcher{opts: opts, connCfg: connCfg, ext: newExtSchema(opts.Schema), poll: opts.PollInterval, done: make(chan struct{}),
		rand: mathrand.New(mathrand.NewSource(int64(binary.LittleEndian.Uint64(seed[:]))))}
	if w.poll == 0 {
		w.poll = time.Second
	}
	if w.poll < historyReadGap {
		w.poll = historyReadGap
	}
	// Hints are a flag, not a queue (pgx would keep every one): a flood of
	// them costs one read per historyReadGap.
	connCfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
		// Where no worker numbers, the changes themselves are hints too.
		if n.Channel == historyChannel || (w.number.Load() && n.Channel == "leaderlock") {
			w.hinted.Store(true)
		}
	}
	if opts.Since != nil {
		w.position.Store(*opts.Since)
	}
	if err := w.connect(ctx, opts.Since == nil); err != nil {
		if !permanent(err) {
			err = classify(nil, err)
		}
		return nil, err
	}
	return w, nil
}

func (w *HistoryWatcher) logf(format string, args ...interface{}) {
	if w.opts.Logf != nil {
		w.opts.Logf("leaderlock history: "+format, args...)
	}
}

// Position is the position through which every transition the watcher
// selects has been delivered by Next: the last one's, or further when the
// history beyond it holds none of the Key or KeyPrefix. Keep it to resume
// later (HistoryOptions.Since). Before the first: where it started.
func (w *HistoryWatcher) Position() int64 { return w.position.Load() }

// Close closes the connection; a Next under way returns ErrWatcherClosed,
// as does every later one. Safe to call more than once, from any goroutine.
func (w *HistoryWatcher) Close() error {
	w.close.Do(func() {
		close(w.done)
		w.mu.Lock() // Next returns once its calls end (cancelled)
		w.drop()
		if w.err == nil {
			w.err = ErrWatcherClosed
		}
		w.mu.Unlock()
	})
	return nil
}

// Next returns the next transition, waiting for one until ctx is done
// (then ctx's error; the watcher goes on at the next call). A lost
// connection (the server restarted, the session terminated, the network)
// is made again with backoff (100 ms doubling to 5 s), going on after the
// last transition delivered. Errors that stop the watcher, returned again
// by every later call: an error matching ErrHistoryPruned (and
// ErrRejected) when transitions after the position were pruned before they
// were read; other refusals for good (*Error: ErrNotInstalled,
// ErrPrivilege, ErrBadArgument); any other SQL error the server answers on
// a live connection, as it is (errors.As reaches its *pgconn.PgError);
// ErrWatcherClosed after Close.
func (w *HistoryWatcher) Next(ctx context.Context) (Transition, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return Transition{}, w.err
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		if len(w.ready) > 0 {
			t := w.ready[0]
			w.ready = w.ready[1:]
			p := t.Position
			if len(w.ready) == 0 && w.head > p {
				p = w.head
			}
			w.position.Store(p)
			return t, nil
		}
		if err := w.interrupted(parent); err != nil {
			return Transition{}, err
		}
		if w.conn == nil {
			if err := sleepUntil(ctx, w.retryAt); err != nil {
				return Transition{}, w.interrupted(parent)
			}
			if err := w.connect(ctx, false); err != nil {
				if stop := w.failed(parent, err); stop != nil {
					return Transition{}, stop
				}
				continue
			}
		}
		if !w.due && !w.hinted.Load() {
			// wait for a hint or the poll
			wctx, wcancel := context.WithDeadline(ctx, w.nextPoll)
			_, err := w.conn.WaitForNotification(wctx)
			timedOut := wctx.Err() != nil && ctx.Err() == nil
			wcancel()
			switch {
			case err == nil: // the handler set hinted, or another channel's
			case timedOut && !w.conn.IsClosed():
				w.due = true
			case w.interrupted(parent) != nil && !w.conn.IsClosed():
				// a wait cut short leaves the connection as it was
				return Transition{}, w.interrupted(parent)
			default:
				if stop := w.failed(parent, err); stop != nil {
					return Transition{}, stop
				}
			}
			continue
		}
		if !w.due {
			// a hint: never sooner than historyReadGap after the last read
			if err := sleepUntil(ctx, w.lastRead.Add(historyReadGap)); err != nil {
				return Transition{}, w.interrupted(parent)
			}
		}
		if err := w.read(ctx); err != nil {
			if stop := w.failed(parent, err); stop != nil {
				return Transition{}, stop
			}
		}
	}
}

// interrupted is ErrWatcherClosed once closed, else parent's error.
func (w *HistoryWatcher) interrupted(parent context.Context) error {
	select {
	case <-w.done:
		return ErrWatcherClosed
	default:
	}
	return parent.Err()
}

// connect makes the connection (finding the extension's schema on it) and
// listens; first: read where to start.
func (w *HistoryWatcher) connect(ctx context.Context, first bool) error {
	timeout := w.connCfg.ConnectTimeout
	if timeout <= 0 {
		timeout = historyCallTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	c, err := w.ext.dial(cctx, w.connCfg)
	cancel()
	if err != nil {
		return err
	}
	cctx, cancel = context.WithTimeout(ctx, historyCallTimeout)
	defer cancel()
	// No worker numbers the history here (the portable edition, a library
	// not preloaded): le_expire_lapsed() does, before each read, as clients
	// there call it anyway; LISTEN to the changes as hints too.
	var worker bool
	if err = c.QueryRow(cctx, w.ext.sql(sqlWorkerServes)).Scan(&worker); err == nil {
		w.number.Store(!worker)
		_, err = c.Exec(cctx, sent(sqlListenHistory))
	}
	if err == nil && !worker {
		_, err = c.Exec(cctx, sent(sqlListen))
	}
	if err == nil && first {
		var p int64
		if err = c.QueryRow(cctx, w.ext.sql(sqlHistoryPosition)).Scan(&p); err == nil {
			w.position.Store(p)
		}
	}
	if err != nil {
		err = classify(c, err)
		c.Close(context.Background())
		return err
	}
	w.conn = c
	w.due = true // what was numbered while no one listened
	return nil
}

// read reads the page after the position into ready.
func (w *HistoryWatcher) read(ctx context.Context) error {
	var key, prefix *string
	if w.opts.Key != "" {
		key = &w.opts.Key
	}
	if w.opts.KeyPrefix != "" {
		prefix = &w.opts.KeyPrefix
	}
	w.hinted.Store(false) // hints until now ask for this read
	w.lastRead = time.Now()
	cctx, cancel := context.WithTimeout(ctx, historyCallTimeout)
	defer cancel()
	if w.number.Load() {
		if _, err := w.conn.Exec(cctx, w.ext.sql(sqlExpire)); err != nil {
			return err
		}
	}
	rows, err := w.conn.Query(cctx, w.ext.sql(sqlHistory), w.position.Load(), key, prefix, int32(historyPage))
	if err != nil {
		return err
	}
	defer rows.Close()
	var page []Transition
	var head int64
	for rows.Next() {
		var pos, term *int64
		var at *time.Time
		var event, k, holder, role, payload *string
		if err := rows.Scan(&pos, &at, &event, &k, &holder, &term, &role, &payload, &head); err != nil {
			return err
		}
		if pos == nil { // no transition
			continue
		}
		t := Transition{Position: *pos, Key: deref(k), Holder: deref(holder), Role: deref(role)}
		if at != nil {
			t.At = *at
		}
		if event != nil {
			t.Event = *event
		}
		if term != nil {
			t.Term = *term
		}
		if payload != nil {
			t.Payload = json.RawMessage(*payload)
		}
		page = append(page, t)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	w.delay = 0 // the connection works
	w.nextPoll = w.lastRead.Add(w.poll)
	w.due = len(page) == historyPage
	w.ready = page
	w.head = 0
	if !w.due { // every selected transition up to head is in the page
		w.head = head
		if len(page) == 0 && head > w.position.Load() {
			w.position.Store(head)
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// failed handles an error of a call: nil when the connection was lost (it
// is made again after a delay), else the error that stops Next (the
// watcher too, unless it is parent's or Close's).
func (w *HistoryWatcher) failed(parent context.Context, err error) error {
	if stop := w.interrupted(parent); stop != nil {
		// a call cut short: its connection may be mid-message
		w.drop()
		return stop
	}
	conn := w.conn
	if conn != nil && conn.IsClosed() {
		conn = nil
	}
	if !permanent(err) { // (connect's are classified already)
		err = classify(conn, err)
	}
	var pe *pgconn.PgError
	if permanent(err) || (conn != nil && errors.As(err, &pe) && !transient(pe)) {
		w.drop()
		w.err = err
		w.logf("stopped after position %d: %v", w.position.Load(), err)
		return err
	}
	w.drop()
	if w.delay == 0 {
		w.delay = historyBackoffFirst
	} else if w.delay *= 2; w.delay > historyBackoffLast {
		w.delay = historyBackoffLast
	}
	d := w.delay/2 + time.Duration(w.rand.Int63n(int64(w.delay/2)+1))
	w.retryAt = time.Now().Add(d)
	w.logf("connection lost (%v); reconnecting in %v, to resume after position %d",
		err, d.Round(time.Millisecond), w.position.Load())
	return nil
}

// transient: an error the server answers on a live connection that is
// worth trying again on a new one (serialization failure, deadlock, out of
// resources, operator intervention such as a cancelled statement,
// connection exceptions).
func transient(pe *pgconn.PgError) bool {
	if pe.Severity == "FATAL" || pe.Severity == "PANIC" {
		return true
	}
	if len(pe.Code) != 5 {
		return false
	}
	switch pe.Code[:2] {
	case "08", "40", "53", "57":
		return true
	}
	return false
}

// drop closes the connection, if any: the next read makes a new one.
func (w *HistoryWatcher) drop() {
	if w.conn != nil {
		w.conn.Close(context.Background())
		w.conn = nil
	}
}

// sleepUntil waits until t, or returns ctx's error.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// String is the transition as one line, for logs.
func (t Transition) String() string {
	return fmt.Sprintf("#%d %s %q holder %q term %d", t.Position, t.Event, t.Key, t.Holder, t.Term)
}

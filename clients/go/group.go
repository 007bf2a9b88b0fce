package leaderlock

// Groups (contract 26, docs/groups.md): a member's share of a group's
// partitions, which the server assigns. One goroutine joins (le_join: the
// first join makes the group, every later one renews the membership and
// all its partitions) every ttl/3, then reads the assignment
// (le_assignment), on a connection of its own: the membership is a tenure
// (tenure.go) whose deadline is the round's send time + ttl - ttl/200,
// renewed by the renewal every tenure has. Each partition owned is a
// tenure of its own under it, ended by a revocation, by its absence from
// the assignment, or with the membership's (its deadline, Leave). Between
// rounds the goroutine waits on its connection: a notification naming the
// member brings the next round sooner (at most once per max(ttl/30, 50
// ms)), and revoked partitions whose callbacks returned are given back
// (le_ack).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// One round trip each, bind parameters, arguments by name ("group" is a
// reserved word); every name qualified (schema.go).
const (
	sqlJoin = `SELECT @extschema@.le_join("group" => $1, member => $2, ttl => pg_catalog.make_interval(secs => $3), ` +
		`partitions => $4::pg_catalog.int4, drain => pg_catalog.make_interval(secs => $5))::pg_catalog.text`
	sqlAssignment = `SELECT partition, term, state FROM @extschema@.le_assignment("group" => $1, member => $2) ` +
		`ORDER BY partition`
	sqlAck   = `SELECT @extschema@.le_ack("group" => $1, member => $2, partition => $3::pg_catalog.int4, term => $4)`
	sqlLeave = `SELECT @extschema@.le_leave("group" => $1, member => $2)`
	// In the caller's transaction (Member.Guard).
	sqlAssertPartition = `SELECT @extschema@.le_assert_partition("group" => $1, partition => $2::pg_catalog.int4, ` +
		`member => $3, term => $4)`
)

var (
	errRevoked = errors.New("the partition was revoked")
	errGone    = errors.New("the partition is not in the member's assignment any more")
	errNotOurs = errors.New("the partition is not the member's")
	farFuture  = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) // a partition's own deadline: its membership's rules
)

// GroupOptions of JoinGroup.
type GroupOptions struct {
	Group string
	// Member is the member's name in the group; default host:pid:random.
	Member string
	// TTL of the membership, renewed every ttl/3; default 10 s.
	TTL time.Duration
	// Partitions and Drain are the group's partition count and the time
	// an owner has to give a revoked partition back, for its first join
	// (or its maker's change). 0: as they are (first join: 10 s of drain).
	Partitions int32
	Drain      time.Duration
	// OnAssigned is called, in a goroutine of the partition's, when a
	// partition is ours in term. Its context ends when the partition is
	// revoked or lost, at the local deadline, and at Leave; its Err()
	// reads the clock on every call. It may return at once (start work
	// elsewhere) or run the work until the context ends.
	OnAssigned func(ctx context.Context, partition int32, term int64)
	// OnRevoked is called, in the same goroutine, once OnAssigned has
	// returned and the partition is no longer ours: stop its work, drain,
	// then return. A partition the server revoked is given back (le_ack)
	// once it returns; one lost (gone from the assignment, past the
	// deadline) is not, and its work must stop at once.
	OnRevoked func(partition int32)
	// Logf, as Config.Logf: failed rounds and reconnections, the loss of
	// every partition, a refusal for good, leaving.
	Logf func(format string, args ...interface{})
	// Schema, as Config.Schema.
	Schema string
}

// Member is a member of a group, renewed by one goroutine until Leave or a
// refusal for good. Its methods are safe for concurrent use.
type Member struct {
	cfg     GroupOptions
	e       *Elector // connection settings, ttl and margin, timeouts
	ctx     context.Context
	cancel  context.CancelFunc // Leave
	stopped chan struct{}      // the renewing goroutine has returned
	soonest time.Duration
	rounds  atomic.Int64 // le_join calls sent

	mu    sync.Mutex
	cur   *tenure              // the membership's tenure (nil: not joined yet)
	parts map[int32]*partition // the newest incarnation of each partition whose callbacks run
	acks  []partitionTerm      // revoked and drained: to give back
	wake  context.CancelFunc   // cuts the wait between rounds short (an ack to send)
	err   error                // the refusal for good that stopped the member
	calls sync.WaitGroup       // callbacks running

	// the renewing goroutine's (then Leave's, once it has returned)
	conn      *pgx.Conn
	listening *pgx.Conn // the connection LISTEN was sent on
	rows      []assignedRow

	leaveOnce sync.Once
	leaveErr  error
}

// partition is one tenure of a partition here: from its grant (as a round
// read it) to its revocation or loss.
type partition struct {
	term    int64
	t       *tenure       // ends at the revocation, the loss, or with of
	of      *tenure       // the membership's tenure it was read in
	prev    *partition    // the incarnation before, whose callbacks come first
	revoked bool          // (Member.mu) given back once its callbacks return
	done    chan struct{} // its callbacks returned
}

type partitionTerm struct {
	partition int32
	term      int64
}

type assignedRow struct {
	partitionTerm
	state string
}

// JoinGroup joins group opts.Group as opts.Member (le_join, then its
// assignment read) on a connection of its own, and starts renewing it.
// ctx bounds that first round only. Bad options match ErrBadArgument
// before anything connects; refusals for good from the server are *Error
// (another role's member: ErrPrivilege; a bad count: ErrBadArgument; no
// groups in this edition: ErrNotInstalled); other errors are worth
// retrying. Call Leave when done.
func JoinGroup(ctx context.Context, dsn string, opts GroupOptions) (*Member, error) {
	if opts.Group == "" {
		return nil, badArgument("Group must not be empty")
	}
	if opts.TTL == 0 {
		opts.TTL = 10 * time.Second
	}
	if opts.TTL < 0 || opts.Partitions < 0 || opts.Drain < 0 {
		return nil, badArgument("TTL, Partitions and Drain must not be negative")
	}
	if opts.Member == "" {
		opts.Member = DefaultIdentity()
	}
	e, err := NewElector(Config{ConnString: dsn, Key: opts.Group, Identity: opts.Member, TTL: opts.TTL, Schema: opts.Schema})
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(context.Background())
	m := &Member{cfg: opts, e: e, ctx: mctx, cancel: cancel, stopped: make(chan struct{}),
		soonest: max(opts.TTL/30, 50*time.Millisecond), parts: map[int32]*partition{}}
	sent, rows, err := m.join(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	go m.run(m.start(sent, rows))
	return m, nil
}

func (m *Member) logf(format string, args ...interface{}) {
	if m.cfg.Logf != nil {
		m.cfg.Logf("leaderlock member %q of group %q: "+format, append([]interface{}{m.cfg.Member, m.cfg.Group}, args...)...)
	}
}

// ID is the member's name in the group.
func (m *Member) ID() string { return m.cfg.Member }

// Owns returns partition's term and true while it is ours: granted, not
// revoked nor lost, and the local deadline not passed (the clock read at
// the call). Check it right before each side effect.
func (m *Member) Owns(partition int32) (int64, bool) {
	term, err := m.check(partition)
	return term, err == nil
}

// Owned is every partition owned now (partition -> term), as Owns says.
func (m *Member) Owned() map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	owned := map[int32]int64{}
	for p, h := range m.parts {
		if h.t.check() == nil {
			owned[p] = h.term
		}
	}
	return owned
}

// check is partition's term, or why it is not ours (matching ErrLeaseLost).
func (m *Member) check(p int32) (int64, error) {
	m.mu.Lock()
	h := m.parts[p]
	m.mu.Unlock()
	if h == nil {
		return 0, &LostError{Reason: StopRefused, Err: fmt.Errorf("%w: %d of %q", errNotOurs, p, m.cfg.Group)}
	}
	return h.term, h.t.check()
}

// Guard fences a write to partition: call it first in the transaction
// that makes it. It checks that the partition is ours (Owns), then runs
// le_assert_partition(group, partition, member, term) in tx, which holds
// the partition ours until tx ends. Its term; an error matching
// ErrLeaseLost when it is not ours here, or when the server says so
// (LE001; the partition is then lost here too): roll tx back.
func (m *Member) Guard(ctx context.Context, tx pgx.Tx, partition int32) (int64, error) {
	term, err := m.check(partition)
	if err != nil {
		return 0, err
	}
	return term, m.assert(ctx, tx, partition, term)
}

func (m *Member) assert(ctx context.Context, tx pgx.Tx, p int32, term int64) error {
	var got int64
	err := tx.QueryRow(ctx, m.e.ext.sql(sqlAssertPartition), m.cfg.Group, p, m.cfg.Member, term).Scan(&got)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == sqlstateNotLeader {
		m.mu.Lock()
		if h := m.parts[p]; h != nil && h.term == term {
			h.t.end(StopRefused, err)
		}
		m.mu.Unlock()
		return &LostError{Reason: StopRefused, Err: err}
	}
	return classify(nil, err)
}

// Stopped is closed when the member has stopped: Leave, or a refusal for
// good (Err).
func (m *Member) Stopped() <-chan struct{} { return m.stopped }

// Err is the refusal for good that stopped the member, if any (an
// *Error); every partition was lost first.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Leave ends every partition here at once (Owns false, contexts done),
// stops the renewal, waits for the callbacks to return (OnRevoked: the
// drain), then leaves (le_leave: the partitions go to the others at
// once). ctx bounds the wait and the call (ttl/3 at most); when it ends
// first, or the call fails, the membership lapses at its ttl. Leaving
// again returns the first Leave's error.
func (m *Member) Leave(ctx context.Context) error {
	m.leaveOnce.Do(func() {
		m.cancel()
		<-m.stopped
		drained := make(chan struct{})
		go func() { m.calls.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-ctx.Done():
			m.leaveErr = fmt.Errorf("leaderlock: callbacks still running, not left (the membership lapses at its ttl): %w", ctx.Err())
			m.closeConn()
			return
		}
		cctx, cancel := context.WithTimeout(ctx, m.e.callTimeout())
		defer cancel()
		var err error
		if m.conn == nil || m.conn.IsClosed() { // (a call cut short closes it)
			m.closeConn()
			m.conn, err = m.e.connect(cctx)
		}
		if err == nil {
			_, err = scanBool(cctx, m.e, m.conn, time.Now().Add(m.e.callTimeout()), sqlLeave, m.cfg.Group, m.cfg.Member)
		}
		m.closeConn()
		if err != nil {
			m.leaveErr = classify(nil, err)
			m.logf("leaving heard no answer (%v): the membership lapses at its ttl", err)
			return
		}
		m.logf("left")
	})
	return m.leaveErr
}

func (m *Member) closeConn() {
	if m.conn != nil {
		m.conn.Close(context.Background())
		m.conn = nil
	}
}

// join connects if need be and makes a round bounded by ttl/3 (the
// first, and those after every partition was lost): its send time and
// the assignment read.
func (m *Member) join(ctx context.Context) (time.Time, []assignedRow, error) {
	if m.conn == nil || m.conn.IsClosed() {
		m.closeConn()
		c, err := m.e.connect(ctx)
		if err != nil {
			return time.Time{}, nil, classify(nil, err)
		}
		m.conn = c
	}
	sent := time.Now()
	rows, err := m.round(ctx, m.conn, sent.Add(m.e.callTimeout()))
	if err != nil {
		err = classify(m.conn, err)
		m.closeConn()
		return time.Time{}, nil, err
	}
	return sent, rows, nil
}

// round joins (renews), then reads the assignment, on c by by.
func (m *Member) round(ctx context.Context, c *pgx.Conn, by time.Time) ([]assignedRow, error) {
	cctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	if m.listening != c { // a new connection: hints from now on
		if _, err := c.Exec(cctx, sent(sqlListen)); err != nil {
			return nil, err
		}
		m.listening = c
	}
	var partitions *int32
	if m.cfg.Partitions > 0 {
		partitions = &m.cfg.Partitions
	}
	var drain *float64
	if m.cfg.Drain > 0 {
		d := m.cfg.Drain.Seconds()
		drain = &d
	}
	var session string
	m.rounds.Add(1)
	if err := c.QueryRow(cctx, m.e.ext.sql(sqlJoin), m.cfg.Group, m.cfg.Member, m.e.ttl.Seconds(),
		partitions, drain).Scan(&session); err != nil {
		return nil, err
	}
	rs, err := c.Query(cctx, m.e.ext.sql(sqlAssignment), m.cfg.Group, m.cfg.Member)
	if err != nil {
		return nil, err
	}
	var rows []assignedRow
	for rs.Next() {
		var r assignedRow
		if err := rs.Scan(&r.partition, &r.term, &r.state); err != nil {
			rs.Close()
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, rs.Err()
}

// start starts the membership's tenure that the round sent at sent won.
func (m *Member) start(sent time.Time, rows []assignedRow) *renewal {
	r := m.e.startTenure(m.ctx, sent)
	m.mu.Lock()
	m.cur = r.t
	m.mu.Unlock()
	m.apply(r.t, rows)
	return r
}

// run renews the membership until Leave or a refusal for good; after a
// loss of every partition (no round answered before the deadline) it
// joins again, with backoff.
func (m *Member) run(r *renewal) {
	defer close(m.stopped)
	bo := &backoff{e: m.e}
	for r != nil {
		cur := r
		r.run(renewing{conn: &m.conn, logf: m.logf, renew: "renew the membership", renewal: "round",
			call: func(ctx context.Context, c *pgx.Conn, by time.Time) (bool, error) {
				rows, err := m.round(ctx, c, by)
				m.rows = rows
				return err == nil, err
			},
			refused: func() {}, // a round is answered or fails
			renewed: func() { m.apply(cur.t, m.rows) },
			idle:    m.idle, soonest: m.soonest}, nil)
		reason, cause, _ := r.t.state()
		r = nil
		switch {
		case reason == StopFailed:
			m.stop(cause)
			return
		case m.ctx.Err() != nil:
			return
		}
		// Not at once: at the deadline the server may still see the
		// session live, for an instant (and rounds just failed).
		d := bo.next()
		m.logf("every partition lost: %s; joining again in %v", reason, d.Round(time.Millisecond))
		for r == nil {
			select {
			case <-time.After(d):
			case <-m.ctx.Done():
				return
			}
			sent, rows, err := m.join(m.ctx)
			switch {
			case err == nil:
				bo.reset()
				r = m.start(sent, rows)
			case m.ctx.Err() != nil:
				return
			case permanent(err):
				m.stop(err)
				return
			default:
				d = bo.next()
				m.logf("cannot join (%v); trying again in %v", err, d.Round(time.Millisecond))
			}
		}
	}
}

func (m *Member) stop(err error) {
	m.logf("stopped, every partition lost: %v", err)
	m.mu.Lock()
	m.err = err
	m.mu.Unlock()
}

// apply acts on an assignment read in the membership's tenure of: ends
// the partitions revoked or gone, gives back at once those revoked that
// nothing here runs on, and starts the new ones.
func (m *Member) apply(of *tenure, rows []assignedRow) {
	owned, revoked := map[int32]int64{}, map[int32]int64{}
	for _, r := range rows {
		if r.state == "owned" {
			owned[r.partition] = r.term
		} else {
			revoked[r.partition] = r.term
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, h := range m.parts {
		if t, ok := revoked[p]; ok && t == h.term {
			h.revoked = true // given back once its callbacks return
			h.t.end(StopRefused, errRevoked)
		} else if t, ok := owned[p]; !ok || t != h.term {
			h.t.end(StopRefused, errGone)
		}
	}
	for p, term := range revoked {
		if h := m.parts[p]; h == nil || h.term != term {
			m.acks = append(m.acks, partitionTerm{p, term})
		}
	}
	for p, term := range owned {
		prev := m.parts[p]
		if prev != nil && prev.term == term {
			if prev.t.check() == nil {
				continue // ours already
			}
			prev.revoked = false // the revocation was withdrawn: nothing to give back
		}
		h := &partition{term: term, of: of, prev: prev, done: make(chan struct{}),
			t: newTenure(leaseContext{of}, farFuture)}
		m.parts[p] = h
		m.calls.Add(1)
		go m.hold(p, h)
	}
}

// hold runs a partition's callbacks, after those of the incarnation
// before; once they have returned, a revoked partition is given back.
func (m *Member) hold(p int32, h *partition) {
	defer m.calls.Done()
	if h.prev != nil {
		<-h.prev.done
	}
	if cb := m.cfg.OnAssigned; cb != nil {
		cb(leaseContext{h.t}, p, h.term)
	}
	select {
	case <-h.t.done:
	case <-h.of.done: // the membership's deadline, Leave
		h.t.end(StopShutdown, nil)
	}
	if cb := m.cfg.OnRevoked; cb != nil {
		cb(p)
	}
	m.mu.Lock()
	if h.revoked && m.ctx.Err() == nil {
		m.acks = append(m.acks, partitionTerm{p, h.term})
		if m.wake != nil {
			m.wake()
		}
	}
	if m.parts[p] == h {
		delete(m.parts, p)
	}
	close(h.done)
	m.mu.Unlock()
}

// idle is the membership's wait between rounds (renewing.idle): it gives
// back the partitions to give back, then waits for a notification until
// due; an ack to send cuts the wait short.
func (m *Member) idle(ctx context.Context, c *pgx.Conn, due time.Time) (bool, error) {
	if err := m.sendAcks(ctx, c); err != nil {
		if ctx.Err() != nil && !c.IsClosed() {
			return false, nil
		}
		return false, err
	}
	wctx, cancel := context.WithDeadline(ctx, due)
	defer cancel()
	m.mu.Lock()
	if len(m.acks) > 0 {
		cancel()
	}
	m.wake = cancel
	m.mu.Unlock()
	n, err := c.WaitForNotification(wctx)
	m.mu.Lock()
	m.wake = nil
	m.mu.Unlock()
	if err != nil {
		if wctx.Err() != nil && !c.IsClosed() { // due, the tenure's end, an ack to send
			return false, nil
		}
		return false, err
	}
	return namesMember(n.Payload, m.cfg.Group, m.cfg.Member), nil
}

// sendAcks gives back each partition queued, each call bounded by ttl/3
// and by the local deadline. One that fails is given back after a later
// round reads it revoked again.
func (m *Member) sendAcks(ctx context.Context, c *pgx.Conn) error {
	for {
		m.mu.Lock()
		if len(m.acks) == 0 {
			m.mu.Unlock()
			return nil
		}
		a := m.acks[0]
		m.acks = m.acks[1:]
		_, _, deadline := m.cur.state()
		m.mu.Unlock()
		by := time.Now().Add(m.e.callTimeout())
		if by.After(deadline) {
			by = deadline
		}
		if _, err := scanBool(ctx, m.e, c, by, sqlAck, m.cfg.Group, m.cfg.Member, a.partition, a.term); err != nil {
			return err
		}
	}
}

// namesMember: payload is a group's announcement as the server writes them
// (partition_granted, partition_revoked or partition_freed; string group,
// member and at; integer partition above 0 and term not below 0) of
// group, naming member. Any role may notify: a hint only.
func namesMember(payload, group, member string) bool {
	var o map[string]json.RawMessage
	if json.Unmarshal([]byte(payload), &o) != nil {
		return false
	}
	var event, g, mb, at string
	var p, term int64
	for name, v := range map[string]interface{}{"event": &event, "group": &g, "member": &mb, "at": &at,
		"partition": &p, "term": &term} {
		raw, ok := o[name]
		if !ok || string(raw) == "null" || json.Unmarshal(raw, v) != nil {
			return false
		}
	}
	switch event {
	case "partition_granted", "partition_revoked", "partition_freed":
	default:
		return false
	}
	return p > 0 && term >= 0 && g == group && mb == member
}

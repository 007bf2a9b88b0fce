package leaderlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrLeaseLost: this process no longer leads (or may no longer: its
	// local deadline passed). Stop acting as leader. Lease.Check, the
	// error of OnStartedLeading's context after a loss, and Lease.Guard
	// return errors that match it with errors.Is; they are *LostError.
	ErrLeaseLost = errors.New("leaderlock: the lease is lost")

	// ErrRejected: the server refused a request for good; retrying cannot
	// help (Run returns it instead of retrying). Every *Error matches it,
	// and matches one of the more precise kinds below when one applies.
	ErrRejected = errors.New("leaderlock: rejected")
	// ErrNotInstalled: the extension's functions are not in the database
	// (CREATE EXTENSION leaderlock was not run there, nor the portable
	// edition's script), or not in the schema that Schema (or
	// LEADERLOCK_SCHEMA) names. Found missing on connecting, its SQLState
	// is 42883 and it wraps no server error.
	ErrNotInstalled = errors.New("leaderlock: extension not installed")
	// ErrPrivilege: the role may not call the extension's functions
	// (EXECUTE revoked), or acts as a holder another role owns (SQLSTATE
	// 42501).
	ErrPrivilege = errors.New("leaderlock: insufficient privilege")
	// ErrBadArgument: a key, id or ttl the server refuses (22023, 22004:
	// empty, too long, a ttl above leaderlock.max_ttl), or a Config that
	// NewElector refuses before anything connects.
	ErrBadArgument = errors.New("leaderlock: bad argument")
	// ErrHistoryPruned: a history watcher's position is older than what
	// the retention keeps (SQLSTATE LE002, leaderlock.history_retention,
	// leaderlock.history_max_rows): transitions after it were deleted
	// before they were read. Read the current state, then watch again from
	// now on (HistoryOptions.Since nil).
	ErrHistoryPruned = errors.New("leaderlock: history position no longer kept")
)

// Error is a request refused for good: errors.Is(err, ErrRejected) holds,
// and errors.Is(err, Kind). errors.As reaches the server's
// *pgconn.PgError through Unwrap.
type Error struct {
	// Kind is ErrNotInstalled, ErrPrivilege, ErrBadArgument,
	// ErrHistoryPruned, or ErrRejected for other refusals (authentication
	// failed, no such database).
	Kind error
	// SQLState is the server's, or "" for a Config refused before
	// connecting.
	SQLState string
	Message  string
	Err      error
}

func (e *Error) Error() string { return e.Message }

// Is matches ErrRejected and the error's Kind.
func (e *Error) Is(target error) bool { return target == ErrRejected || target == e.Kind }

func (e *Error) Unwrap() error { return e.Err }

func badArgument(format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Kind: ErrBadArgument, Message: "leaderlock: bad argument: " + msg}
}

// StopReason says why a tenure ended (OnStoppedLeading's argument).
type StopReason int

const (
	// StopRefused: the server refused a renewal (the lease is someone
	// else's, or was force-released), or Lease.Guard was told LE001.
	StopRefused StopReason = iota + 1
	// StopDeadline: no renewal succeeded before the local deadline (the
	// server unreachable or frozen, or this process paused).
	StopDeadline
	// StopShutdown: Run's context ended. The lease was released if
	// Config.ReleaseOnCancel is set, else it lapses at its ttl.
	StopShutdown
	// StopFailed: a renewal was rejected for good (EXECUTE revoked, the
	// extension dropped): Run returns that *Error.
	StopFailed
)

func (r StopReason) String() string {
	switch r {
	case StopRefused:
		return "refused"
	case StopDeadline:
		return "deadline"
	case StopShutdown:
		return "shutdown"
	case StopFailed:
		return "failed"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// LostError is why a lease may no longer be acted on: errors.Is(err,
// ErrLeaseLost) holds, and errors.Is(err, context.DeadlineExceeded) for
// StopDeadline. Err is the cause, when there is one (the server's LE001,
// the rejected renewal).
type LostError struct {
	Reason StopReason
	Err    error
}

func (e *LostError) Error() string {
	var what string
	switch e.Reason {
	case StopRefused:
		what = "the server says another holds it"
	case StopDeadline:
		what = "its local deadline passed without a renewal"
	case StopFailed:
		what = "a renewal was rejected"
	default:
		what = e.Reason.String()
	}
	if e.Err != nil {
		return fmt.Sprintf("leaderlock: the lease is lost: %s: %v", what, e.Err)
	}
	return "leaderlock: the lease is lost: " + what
}

// Is matches ErrLeaseLost, and context.DeadlineExceeded for StopDeadline.
func (e *LostError) Is(target error) bool {
	return target == ErrLeaseLost || (e.Reason == StopDeadline && target == context.DeadlineExceeded)
}

func (e *LostError) Unwrap() error { return e.Err }

const (
	sqlstateUndefinedFunction = "42883"
	sqlstateUndefinedTable    = "42P01"
	sqlstateNotLeader         = "LE001"
	sqlstateHistoryPruned     = "LE002"
	sqlExtensionHere          = "SELECT pg_catalog.current_database()::pg_catalog.text, " +
		"EXISTS (SELECT 1 FROM pg_catalog.pg_extension " +
		"WHERE extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)"
)

// classify returns err as an *Error when retrying cannot help, else err
// itself (unreachable, timed out, shutting down: worth retrying). conn,
// when not nil, is usable to name the database of a missing extension.
func classify(conn *pgx.Conn, err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	described := fmt.Sprintf("%s: %s (SQLSTATE %s)", pe.Severity, pe.Message, pe.Code)
	rejected := func(kind error, msg string) error {
		return &Error{Kind: kind, SQLState: pe.Code, Message: msg, Err: err}
	}
	switch pe.Code {
	case sqlstateUndefinedFunction, sqlstateUndefinedTable:
		if !strings.Contains(pe.Message, "le_") && !strings.Contains(pe.Message, "leaderlock") {
			return rejected(ErrRejected, "leaderlock: "+described)
		}
		if conn != nil && !conn.IsClosed() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var database string
			var installed bool
			qerr := conn.QueryRow(ctx, sent(sqlExtensionHere)).Scan(&database, &installed)
			cancel()
			if qerr == nil && !installed {
				return rejected(ErrNotInstalled, fmt.Sprintf("leaderlock: extension leaderlock is not installed in database %q: "+
					"a superuser runs CREATE EXTENSION leaderlock there (the portable edition: no schema there holds "+
					"its le_capabilities()) (%s)", database, described))
			}
			if qerr == nil {
				return rejected(ErrNotInstalled, fmt.Sprintf("leaderlock: extension leaderlock in database %q lacks a function "+
					"this client calls: ALTER EXTENSION leaderlock UPDATE there (%s)", database, described))
			}
		}
		return rejected(ErrNotInstalled, "leaderlock: extension leaderlock is not installed in this database ("+described+")")
	case "42501":
		return rejected(ErrPrivilege, "leaderlock: insufficient privilege: "+described)
	case "22023", "22004":
		if slotsDiffer(err) {
			return err
		}
		return rejected(ErrBadArgument, "leaderlock: bad argument: "+described)
	case sqlstateHistoryPruned:
		return rejected(ErrHistoryPruned, "leaderlock: history pruned: "+described)
	case "28P01", "28000", "3D000":
		return rejected(ErrRejected, "leaderlock: connection refused for good: "+described)
	}
	return err
}

// permanent reports whether err is a refusal for good (*Error).
func permanent(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

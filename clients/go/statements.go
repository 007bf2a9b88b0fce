package leaderlock

import "github.com/leaderlock/leaderlock/clients/go/internal/stmttrace"

// statements: every statement constant of the package, by name.
// statements_test.go checks that it lists them all and that none depends
// on the search_path; the tour (internal/tour) reports those it did not
// send.
var statements = map[string]string{
	"sqlFindSchema":      sqlFindSchema,
	"sqlExtensionHere":   sqlExtensionHere,
	"sqlTryAcquire":      sqlTryAcquire,
	"sqlRenew":           sqlRenew,
	"sqlRelease":         sqlRelease,
	"sqlRenewLegacy":     sqlRenewLegacy,
	"sqlReleaseLegacy":   sqlReleaseLegacy,
	"sqlHolds":           sqlHolds,
	"sqlTermOf":          sqlTermOf,
	"sqlStillOurs":       sqlStillOurs,
	"sqlLeader":          sqlLeader,
	"sqlWorkerServes":    sqlWorkerServes,
	"sqlWorkerRuns":      sqlWorkerRuns,
	"sqlExpire":          sqlExpire,
	"sqlProclaim":        sqlProclaim,
	"sqlListen":          sqlListen,
	"sqlUnlisten":        sqlUnlisten,
	"sqlListenProbe":     sqlListenProbe,
	"sqlNotifyProbe":     sqlNotifyProbe,
	"sqlAssertLeader":    sqlAssertLeader,
	"sqlOpenSession":     sqlOpenSession,
	"sqlRenewSession":    sqlRenewSession,
	"sqlCloseSession":    sqlCloseSession,
	"sqlTryAcquireIn":    sqlTryAcquireIn,
	"sqlAcquireIn":       sqlAcquireIn,
	"sqlSessionTerm":     sqlSessionTerm,
	"sqlLeNow":           sqlLeNow,
	"sqlClaimRun":        sqlClaimRun,
	"sqlRenewRun":        sqlRenewRun,
	"sqlFinishRun":       sqlFinishRun,
	"sqlRunState":        sqlRunState,
	"sqlNextDue":         sqlNextDue,
	"sqlHistory":         sqlHistory,
	"sqlHistoryPosition": sqlHistoryPosition,
	"sqlListenHistory":   sqlListenHistory,
	"sqlLockRead":        sqlLockRead,
	"sqlLockAcquire":     sqlLockAcquire,
	"sqlJoin":            sqlJoin,
	"sqlAssignment":      sqlAssignment,
	"sqlAck":             sqlAck,
	"sqlLeave":           sqlLeave,
	"sqlAssertPartition": sqlAssertPartition,
}

func init() { stmttrace.Register(statements) }

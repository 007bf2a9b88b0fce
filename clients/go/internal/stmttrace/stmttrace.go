// Package stmttrace lets the programs of this module (the tour,
// internal/tour) see which of the library's statements they sent: the
// library registers its statement constants by name, and calls Sent with
// each one it sends (its text as written, before the extension's schema is
// put in). Internal: not for users of the library.
package stmttrace

import "sync/atomic"

var (
	statements map[string]string // by name; set once, by the library's init
	hook       atomic.Pointer[func(stmt string)]
)

// Register is the library's: its statement constants by name.
func Register(byName map[string]string) { statements = byName }

// Statements returns the library's statement constants by name.
func Statements() map[string]string {
	m := make(map[string]string, len(statements))
	for k, v := range statements {
		m[k] = v
	}
	return m
}

// SetHook makes f see every statement the library sends from now on (nil:
// none). f must be safe for concurrent use.
func SetHook(f func(stmt string)) {
	if f == nil {
		hook.Store(nil)
		return
	}
	hook.Store(&f)
}

// Sent is the library's: it tells the hook, if any, of stmt.
func Sent(stmt string) {
	if f := hook.Load(); f != nil {
		(*f)(stmt)
	}
}

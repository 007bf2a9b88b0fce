package leaderlock

// No statement this package sends depends on the session's search_path
// (SECURITY.md): a database's owner may set one for every role (ALTER
// DATABASE ... SET search_path = evil, pg_catalog, "$user", public), and
// a function, operator or type of hers found first on it would run as the
// client's role, or a view of hers named as leaderlock's would answer for
// it. So every statement writes PostgreSQL's functions, aggregates and
// types pg_catalog.name, its operators OPERATOR(pg_catalog.=), and
// leaderlock's functions, tables and views @extschema@.name, where
// @extschema@ is replaced by the extension's schema as the server quotes
// it, found by sqlFindSchema on each new connection (before any other
// statement of leaderlock). No SET: behind a transaction-pooling
// pgbouncer it would not stick. statements_test.go checks every statement.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderlock/leaderlock/clients/go/internal/stmttrace"
)

const (
	// The extension's schema, quoted by the server: the one of CREATE
	// EXTENSION; without a pg_extension row (the portable edition,
	// installed by its script), each schema that holds le_capabilities().
	// $1: the schema the user named (Schema, LEADERLOCK_SCHEMA), or NULL.
	// The same statement in every leaderlock client.
	sqlFindSchema = `SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)
FROM pg_catalog.pg_namespace n
WHERE ($1::pg_catalog.text IS NULL OR n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name)
  AND CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e
                        WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)
      THEN n.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
             SELECT e.extnamespace FROM pg_catalog.pg_extension e
             WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name))
      ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid
                     AND p.proname OPERATOR(pg_catalog.=) 'le_capabilities'::pg_catalog.name
                     AND p.pronargs OPERATOR(pg_catalog.=) 0::pg_catalog.int2)
  END
ORDER BY 1`
	// extSchemaPlaceholder: in a statement, where the extension's schema goes.
	extSchemaPlaceholder = "@extschema@"
	// schemaEnv: the default of the Schema options.
	schemaEnv = "LEADERLOCK_SCHEMA"
)

// extSchema is where leaderlock is for the connections of one Elector,
// Session, Scheduler or HistoryWatcher (one database): the schema the
// user named, if any, and the one the last new connection found.
type extSchema struct {
	named  *string                // Schema (or LEADERLOCK_SCHEMA); nil: none named
	quoted atomic.Pointer[string] // as the server quotes it
}

// newExtSchema: named is a Schema option; "" is LEADERLOCK_SCHEMA, if set.
func newExtSchema(named string) *extSchema {
	if named == "" {
		named = os.Getenv(schemaEnv)
	}
	x := &extSchema{}
	if named != "" {
		x.named = &named
	}
	return x
}

// sql is stmt, a statement constant, with the extension's schema put in.
func (x *extSchema) sql(stmt string) string {
	stmttrace.Sent(stmt)
	q := x.quoted.Load()
	if q == nil { // no connection found it: none is open, nothing is sent
		return stmt
	}
	return strings.ReplaceAll(stmt, extSchemaPlaceholder, *q)
}

// sent is stmt, a statement without the placeholder, as sent.
func sent(stmt string) string {
	stmttrace.Sent(stmt)
	return stmt
}

// dial connects with cfg (within ctx) and finds the extension's schema on
// the new connection. No schema, or several, is an *Error (ErrNotInstalled,
// ErrBadArgument); others are the connection's or the server's.
func (x *extSchema) dial(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, err
	}
	if err := x.find(ctx, c); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

// find runs sqlFindSchema on c.
func (x *extSchema) find(ctx context.Context, c *pgx.Conn) error {
	rows, err := c.Query(ctx, sent(sqlFindSchema), x.named)
	if err != nil {
		return err
	}
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return err
		}
		found = append(found, s)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	switch {
	case len(found) == 1:
		x.quoted.Store(&found[0])
		return nil
	case len(found) == 0 && x.named != nil:
		return &Error{Kind: ErrNotInstalled, SQLState: sqlstateUndefinedFunction,
			Message: fmt.Sprintf("leaderlock: schema %q of database %q does not hold leaderlock (Schema, or %s, names it): "+
				"name the schema of CREATE EXTENSION leaderlock, or the one the portable edition's script was run in",
				*x.named, databaseOf(ctx, c), schemaEnv)}
	case len(found) == 0:
		return &Error{Kind: ErrNotInstalled, SQLState: sqlstateUndefinedFunction,
			Message: fmt.Sprintf("leaderlock: extension leaderlock is not installed in database %q: "+
				"a superuser runs CREATE EXTENSION leaderlock there (the portable edition: no schema there holds "+
				"its le_capabilities())", databaseOf(ctx, c))}
	}
	names := make([]string, len(found))
	for i, s := range found {
		names[i] = fmt.Sprintf("%q", s)
	}
	return badArgument("leaderlock's functions are in several schemas of database %q: %s; "+
		"set Schema (or the environment variable %s) to the one to use",
		databaseOf(ctx, c), strings.Join(names, ", "), schemaEnv)
}

// databaseOf names c's database, for an error's message.
func databaseOf(ctx context.Context, c *pgx.Conn) string {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var database string
	var installed bool
	if err := c.QueryRow(qctx, sent(sqlExtensionHere)).Scan(&database, &installed); err != nil {
		return c.Config().Database
	}
	return database
}

-- le_assert_leader raises its own SQLSTATE, which pgrx's error path cannot
-- carry (it maps unknown codes to XX000). So it is a plain V1 C function:
-- all Rust work runs inside a guarded inner function, and only the final
-- ereport happens out here, where no Rust frame is left to unwind.
CREATE FUNCTION le_assert_leader(key text, id text, term bigint DEFAULT NULL)
RETURNS bigint
VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
LANGUAGE c AS 'MODULE_PATHNAME', 'le_assert_leader_c';

-- Contract 26: the guard of a partition of a group, raising the same
-- SQLSTATE (LE001), for the same reason a plain V1 C function.
CREATE FUNCTION le_assert_partition("group" text, partition integer, member text,
                                    term bigint DEFAULT NULL)
RETURNS bigint
VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
LANGUAGE c AS 'MODULE_PATHNAME', 'le_assert_partition_c';

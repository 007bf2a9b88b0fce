-- Contract 23: reading the history of transitions (the rows are written by
-- the transitions themselves, numbered by the worker: schema.sql).
--
-- SECURITY INVOKER: the history is readable by every role, as the lease
-- table is. STABLE: one snapshot for the retention check and the rows, so
-- a prune committing in between cannot make a gap look like a clean read.

-- The transitions numbered after position `after` (0: from the first,
-- an error once any was pruned), in position order, at most `max_rows`, for one key (for_key) or the keys
-- starting with `key_prefix` when given. A position already pruned is an
-- error (LE002), not an empty answer: the reader missed transitions.
CREATE FUNCTION le_history(after bigint DEFAULT 0, for_key text DEFAULT NULL,
                           key_prefix text DEFAULT NULL, max_rows integer DEFAULT 1000)
RETURNS TABLE ("position" bigint, at timestamptz, event text, key text, holder text,
               term bigint, role regrole, payload jsonb)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    pruned bigint;
BEGIN
    IF $1 IS NULL OR $1 < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: after must be 0 or a history position, not %s',
                             coalesce($1::text, 'NULL'));
    END IF;
    IF $4 IS NULL OR $4 < 1 OR $4 > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: max_rows must be between 1 and 100000, not %s',
                             coalesce($4::text, 'NULL'));
    END IF;
    IF $2 IS NOT NULL AND $3 IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'leaderlock: give for_key or key_prefix, not both';
    END IF;
    SELECT h.pruned_through INTO pruned FROM @extschema@.leaderlock_history_head h;
    IF $1 < pruned THEN
        RAISE EXCEPTION USING ERRCODE = 'LE002',
            MESSAGE = format('leaderlock: history position %s is no longer kept: positions up to %s '
                             'were pruned', $1, pruned),
            DETAIL = 'Transitions after it were deleted by the retention (leaderlock.history_retention, '
                     'leaderlock.history_max_rows) before they were read.',
            HINT = 'Read the current state (leaderlock_status), then resume from le_history_position().';
    END IF;
    RETURN QUERY
        SELECT h.position, h.at, h.event, h.key, h.holder, h.term, h.role::regrole, h.payload
          FROM @extschema@.leaderlock_history h
         WHERE h.position > $1
           AND ($2 IS NULL OR h.key = $2)
           AND ($3 IS NULL OR starts_with(h.key, $3))
         ORDER BY h.position
         LIMIT $4;
END
$fn$;

-- The last position numbered (0 before the first): where a reader that
-- wants only what happens from now on starts.
CREATE FUNCTION le_history_position() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN greatest((SELECT max(h.position) FROM @extschema@.leaderlock_history h),
                (SELECT h.pruned_through FROM @extschema@.leaderlock_history_head h), 0::bigint);

-- The per-database counters as a view, readable by all (contract 14).
CREATE VIEW leaderlock_database_stats AS
SELECT datid, datname, acquired, renewed, refused, released, expired, since
  FROM le_database_stats();
REVOKE ALL ON leaderlock_database_stats FROM PUBLIC;
GRANT SELECT ON leaderlock_database_stats TO PUBLIC;

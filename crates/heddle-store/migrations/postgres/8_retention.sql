-- The ended tasks by status time, for retention (purge_finished): the
-- `state` term of its queries matches this index's own.
CREATE INDEX tasks_finished ON tasks (status_ms) WHERE state IN (3, 4, 5, 7);

-- Scale-out: every task row carries the generation it was saved at (the
-- count of its applied events), so a save never goes back and replicas can
-- tell which events a snapshot already holds; and the leases that say which
-- replica runs which task. A lease is renewed for all of a replica's tasks
-- in one statement, hence the index on replica; the reaper scans by expiry.
ALTER TABLE tasks ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;

CREATE TABLE task_leases (
    agent      TEXT COLLATE "C" NOT NULL,
    task_id    TEXT COLLATE "C" NOT NULL,
    owner      TEXT COLLATE "C" NOT NULL,
    replica    TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    PRIMARY KEY (agent, task_id)
);
CREATE INDEX task_leases_by_replica ON task_leases (replica);
CREATE INDEX task_leases_by_expiry ON task_leases (expires_ms);

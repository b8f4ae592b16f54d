-- Tasks: protobuf bytes beside the columns ListTasks filters and sorts on.
-- Ids compare bytewise (COLLATE "C") so pages come in the order every other
-- store uses (page.rs: status ms, then id, descending), whatever the
-- database's locale. One index per ListTasks shape, each already in output
-- order, so a page is an index range scan; a partial index so
-- fail_interrupted visits only live tasks.
CREATE TABLE tasks (
    agent      TEXT COLLATE "C" NOT NULL,
    id         TEXT COLLATE "C" NOT NULL,
    owner      TEXT COLLATE "C" NOT NULL,
    context_id TEXT COLLATE "C" NOT NULL,
    state      INTEGER NOT NULL,
    status_ms  BIGINT  NOT NULL,
    body       BYTEA   NOT NULL,
    PRIMARY KEY (agent, id)
);
CREATE INDEX tasks_by_time ON tasks (agent, owner, status_ms DESC, id DESC);
CREATE INDEX tasks_by_context ON tasks (agent, owner, context_id, status_ms DESC, id DESC);
CREATE INDEX tasks_by_state ON tasks (agent, owner, state, status_ms DESC, id DESC);
CREATE INDEX tasks_running ON tasks (state) WHERE state IN (1, 2);

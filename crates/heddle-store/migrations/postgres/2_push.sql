-- Push configs, owned like tasks; `created` keeps creation order (a
-- replaced config keeps its place: an upsert does not renumber it).
CREATE TABLE push_configs (
    agent   TEXT COLLATE "C" NOT NULL,
    task_id TEXT COLLATE "C" NOT NULL,
    id      TEXT COLLATE "C" NOT NULL,
    owner   TEXT COLLATE "C" NOT NULL,
    version TEXT   NOT NULL,
    created BIGINT GENERATED ALWAYS AS IDENTITY,
    body    BYTEA  NOT NULL,
    PRIMARY KEY (agent, task_id, id)
);

-- The delivery outbox. `state` is 0 pending, 2 dead (delivered rows are
-- deleted). `claimed_by`/`claimed_until` say which store instance (hub
-- replica) holds the delivery's group (agent, task, config) and until when;
-- see postgres_push.rs.
CREATE TABLE push_outbox (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            TEXT COLLATE "C" NOT NULL,
    agent         TEXT COLLATE "C" NOT NULL,
    owner         TEXT COLLATE "C" NOT NULL,
    task_id       TEXT COLLATE "C" NOT NULL,
    config_id     TEXT COLLATE "C" NOT NULL,
    version       TEXT     NOT NULL,
    target        BYTEA    NOT NULL,
    content_type  TEXT     NOT NULL,
    body          BYTEA    NOT NULL,
    state         SMALLINT NOT NULL DEFAULT 0,
    attempts      BIGINT   NOT NULL DEFAULT 0,
    next_ms       BIGINT   NOT NULL DEFAULT 0,
    last_error    TEXT     NOT NULL DEFAULT '',
    claimed_by    TEXT     NOT NULL DEFAULT '',
    claimed_until TIMESTAMPTZ NOT NULL DEFAULT '-infinity'
);
CREATE INDEX push_outbox_pending ON push_outbox (seq) WHERE state = 0;
CREATE INDEX push_outbox_dead ON push_outbox (seq) WHERE state = 2;
CREATE INDEX push_outbox_groups ON push_outbox (agent, task_id, config_id, claimed_until)
    WHERE state = 0;

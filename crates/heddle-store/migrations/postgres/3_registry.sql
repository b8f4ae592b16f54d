-- The hub's registered agents, and the links from a hosted task to the task
-- it stands for elsewhere.
CREATE TABLE registry_agents (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    document   TEXT   NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE TABLE task_links (
    agent   TEXT COLLATE "C" NOT NULL,
    task_id TEXT COLLATE "C" NOT NULL,
    link    TEXT NOT NULL,
    PRIMARY KEY (agent, task_id)
);

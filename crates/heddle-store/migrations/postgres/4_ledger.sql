-- The ledger (postgres_ledger.rs): transactions and their entries, append
-- only, an entry per leg numbered by `seq`; a running balance per account
-- and currency, which a debit is checked and applied against in one
-- conditional UPDATE; reservations, open until `charged` is set (a partial
-- index so start-up finds the open ones without reading the settled); and
-- subscriptions. Account names are Account::key() (`wallet:ID`, ...).
CREATE TABLE ledger_transactions (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       TEXT   NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE TABLE ledger_entries (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    txn         BIGINT NOT NULL REFERENCES ledger_transactions (id),
    account     TEXT COLLATE "C" NOT NULL,
    currency    TEXT COLLATE "C" NOT NULL,
    amount      BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    reservation TEXT COLLATE "C",
    memo        TEXT   NOT NULL,
    created_ms  BIGINT NOT NULL
);
CREATE INDEX ledger_entries_by_account ON ledger_entries (account, seq);
CREATE INDEX ledger_entries_by_txn ON ledger_entries (txn);
CREATE TABLE ledger_balances (
    account  TEXT COLLATE "C" NOT NULL,
    currency TEXT COLLATE "C" NOT NULL,
    balance  BIGINT NOT NULL,
    PRIMARY KEY (account, currency)
);
CREATE TABLE ledger_reservations (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    owner      TEXT COLLATE "C" NOT NULL,
    agent      TEXT COLLATE "C" NOT NULL,
    task       TEXT   NOT NULL,
    currency   TEXT COLLATE "C" NOT NULL,
    amount     BIGINT NOT NULL,
    charged    BIGINT,
    created_ms BIGINT NOT NULL
);
CREATE INDEX ledger_reservations_open ON ledger_reservations (created_ms, id)
    WHERE charged IS NULL;
CREATE TABLE ledger_subscriptions (
    owner    TEXT COLLATE "C" NOT NULL,
    agent    TEXT COLLATE "C" NOT NULL,
    until_ms BIGINT NOT NULL,
    PRIMARY KEY (owner, agent)
);

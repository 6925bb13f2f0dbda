-- 0002_ledger_tree: the per-org RFC 9162 Merkle tree over the ledger and its
-- signed checkpoints, written by ledger.Seal (never on the append path).
--
-- Ledgers written before this migration have no rows here: their sealed
-- size is 0, and their first Seal covers every entry.

-- The tlog stored hashes of each org's tree, by stored-hash index
-- (golang.org/x/mod/sumdb/tlog.StoredHashIndex): sealing entries 1..n
-- stores indexes 0 .. StoredHashCount(n)-1, only ever appended.
CREATE TABLE ledger_hashes (
    org_id text COLLATE "C" NOT NULL,
    idx    bigint NOT NULL CHECK (idx >= 0),
    hash   bytea NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (org_id, idx)
);

-- Signed checkpoints, one per sealed tree size; the latest is the largest.
-- note is the C2SP signed note byte for byte; origin and root_hash repeat
-- what it says, for lookups.
CREATE TABLE ledger_checkpoints (
    org_id    text COLLATE "C" NOT NULL,
    tree_size bigint NOT NULL CHECK (tree_size >= 0),
    origin    bytea NOT NULL,
    root_hash bytea NOT NULL CHECK (length(root_hash) = 32),
    note      bytea NOT NULL,
    PRIMARY KEY (org_id, tree_size)
);

package pebblestore

import (
	"encoding/binary"
	"math"
	"time"
)

// Key layout (see doc.go). Every key starts with a one-byte table tag; the
// org-scoped tables then carry the org id, length-prefixed (uvarint), and a
// one-byte sub-table tag, so all of an org's data is one contiguous range.
const (
	tagMeta   = 'm' // m <name>                          -> store metadata
	tagAPIKey = 'k' // k <hash>                          -> tenant.APIKey (JSON)
	tagOrg    = 'o' // o <lp org> <sub-table> ...        -> org-scoped records
	tagKeyRev = 'g' // g <kid>                           -> store.KeyRevocation (JSON): a revoked grant-signing key
)

// Sub-tables under an org.
const (
	subOrg         = 'o' // .. o                           -> tenant.Org (JSON)
	subHead        = 'h' // .. h                           -> ledger.Head (JSON)
	subEntry       = 'l' // .. l <seq u64be>               -> ledger.Entry (JSON)
	subBundle      = 'b' // .. b <seq u64be>               -> store.BundleRecord (JSON)
	subBundleVer   = 'v' // .. v <version>                 -> <seq u64be>
	subDossier     = 'd' // .. d <dossier id>              -> dossier value (see codec.go)
	subDecision    = 'x' // .. x <decision id>             -> <dossier id>
	subSummary     = 's' // .. s <created_at i64be^sign> <dossier id> -> summary (JSON)
	subIdempotency = 'i' // .. i <lp scope> <key>          -> store.IdempotencyRecord (JSON)
	subGrant       = 'g' // .. g <grant id>                -> claim.Grant (JSON)
	subGrantState  = 'q' // .. q <lp state> <issued_at i64be^sign> <grant id> -> empty
	subNonce       = 'n' // .. n <nonce>                   -> <grant id>
	subScope       = 'c' // .. c <scope>                   -> claim.ScopeClaim (JSON)
	subRegKey      = 'r' // .. r <lp kind> <kid>           -> registry.Key (JSON)
	subTreeHash    = 't' // .. t <index u64be>             -> 32-byte ledger tree hash
	subCheckpoint  = 'p' // .. p <size u64be>              -> ledger checkpoint (see codec.go)
	subActivation  = 'u' // .. u                           -> store.Activation (JSON): the version in use
	subSubscriber  = 'w' // .. w <name>                    -> empty: an outbox subscriber of the org
)

// formatKey holds the layout version; Open refuses an unknown one.
var formatKey = []byte{tagMeta, 'f', 'o', 'r', 'm', 'a', 't'}

// formatVersion 2 adds activations, 3 jobs (without the all-orgs artifact
// index); Open upgrades a version 1 or 2 database (upgradeActivations,
// upgradeExportJobs).
const formatVersion = "3"

func apiKeyKey(hash string) []byte {
	return append([]byte{tagAPIKey}, hash...)
}

func keyRevocationKey(kid string) []byte {
	return append([]byte{tagKeyRev}, kid...)
}

// orgPrefix returns o <lp org> <sub> with spare capacity for a suffix.
func orgPrefix(orgID string, sub byte, extra int) []byte {
	k := make([]byte, 0, 2+binary.MaxVarintLen64+len(orgID)+extra)
	k = append(k, tagOrg)
	k = binary.AppendUvarint(k, uint64(len(orgID)))
	k = append(k, orgID...)
	return append(k, sub)
}

func orgKey(orgID string) []byte        { return orgPrefix(orgID, subOrg, 0) }
func headKey(orgID string) []byte       { return orgPrefix(orgID, subHead, 0) }
func activationKey(orgID string) []byte { return orgPrefix(orgID, subActivation, 0) }

func entryKey(orgID string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(orgPrefix(orgID, subEntry, 8), seq)
}

// treeHashKey is the key of the org's tree hash at tlog stored-hash index idx.
func treeHashKey(orgID string, idx int64) []byte {
	return binary.BigEndian.AppendUint64(orgPrefix(orgID, subTreeHash, 8), uint64(idx))
}

func checkpointKey(orgID string, size uint64) []byte {
	return binary.BigEndian.AppendUint64(orgPrefix(orgID, subCheckpoint, 8), size)
}

func bundleKey(orgID string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(orgPrefix(orgID, subBundle, 8), seq)
}

func bundleVersionKey(orgID, version string) []byte {
	return append(orgPrefix(orgID, subBundleVer, len(version)), version...)
}

func dossierKey(orgID, dossierID string) []byte {
	return append(orgPrefix(orgID, subDossier, len(dossierID)), dossierID...)
}

func decisionKey(orgID, decisionID string) []byte {
	return append(orgPrefix(orgID, subDecision, len(decisionID)), decisionID...)
}

func summaryKey(orgID string, createdAt time.Time, dossierID string) []byte {
	k := orgPrefix(orgID, subSummary, 8+len(dossierID))
	k = binary.BigEndian.AppendUint64(k, timeOrder(createdAt))
	return append(k, dossierID...)
}

// summaryBound is the first summary key at or after t.
func summaryBound(orgID string, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(orgPrefix(orgID, subSummary, 8), timeOrder(t))
}

func idempotencyKey(orgID, scope, key string) []byte {
	k := orgPrefix(orgID, subIdempotency, binary.MaxVarintLen64+len(scope)+len(key))
	k = binary.AppendUvarint(k, uint64(len(scope)))
	k = append(k, scope...)
	return append(k, key...)
}

func grantKey(orgID, grantID string) []byte {
	return append(orgPrefix(orgID, subGrant, len(grantID)), grantID...)
}

// grantStatePrefix is the index prefix of the org's grants in state.
func grantStatePrefix(orgID, state string, extra int) []byte {
	k := orgPrefix(orgID, subGrantState, binary.MaxVarintLen64+len(state)+extra)
	k = binary.AppendUvarint(k, uint64(len(state)))
	return append(k, state...)
}

func grantStateKey(orgID, state string, issuedAt time.Time, grantID string) []byte {
	k := grantStatePrefix(orgID, state, 8+len(grantID))
	k = binary.BigEndian.AppendUint64(k, timeOrder(issuedAt))
	return append(k, grantID...)
}

func nonceKey(orgID, nonce string) []byte {
	return append(orgPrefix(orgID, subNonce, len(nonce)), nonce...)
}

func scopeKey(orgID, scope string) []byte {
	return append(orgPrefix(orgID, subScope, len(scope)), scope...)
}

// regKeyPrefix is the prefix of the org's registered keys of kind.
func regKeyPrefix(orgID, kind string, extra int) []byte {
	k := orgPrefix(orgID, subRegKey, binary.MaxVarintLen64+len(kind)+extra)
	k = binary.AppendUvarint(k, uint64(len(kind)))
	return append(k, kind...)
}

func regKeyKey(orgID, kind, kid string) []byte {
	return append(regKeyPrefix(orgID, kind, len(kid)), kid...)
}

// upperBound returns the smallest key greater than every key with prefix p
// (p never consists only of 0xff bytes here: it starts with a tag).
func upperBound(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// timeOrder maps t to a uint64 whose big-endian bytes sort like t. Times
// outside the int64-nanosecond range (years 1678..2262) are clamped.
func timeOrder(t time.Time) uint64 {
	var n int64
	switch {
	case t.Before(minTime):
		n = math.MinInt64
	case t.After(maxTime):
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	return uint64(n) ^ (1 << 63)
}

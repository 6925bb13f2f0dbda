package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
)

// exampleLedger appends n decision entries to a fresh in-memory ledger of
// org-1 (memLedger stands in for a store.Tx / store.Reader).
func exampleLedger(n int) *memLedger {
	m := &memLedger{org: "org-1"}
	exampleAppend(m, n)
	return m
}

// exampleAppend appends n more entries to m.
func exampleAppend(m *memLedger, n int) {
	start := len(m.entries)
	for i := start + 1; i <= start+n; i++ {
		subject := fmt.Sprintf("dossier-%d", i)
		r := ledger.Record{Kind: ledger.KindDecision, SubjectID: subject, PayloadDigest: canon.Digest([]byte(subject))}
		if _, err := ledger.Append(context.Background(), m, "org-1", r, t0); err != nil {
			panic(err)
		}
	}
}

// exampleKey is a fixed ledger key; production keys come from
// GenerateKey(crypto/rand.Reader, name) or NewKey(name, storedSeed).
func exampleKey() *ledger.Key {
	k, err := ledger.GenerateKey(bytes.NewReader(make([]byte, 32)), "clearance.example/ledger")
	if err != nil {
		panic(err)
	}
	return k
}

func ExampleGenerateKey() {
	k := exampleKey()
	fmt.Println(k.VerifierKey())
	// Output:
	// clearance.example/ledger+9d2aba27+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop
}

// Seal runs inside the org's store Update; it signs a C2SP tlog-checkpoint.
func ExampleSeal() {
	ctx := context.Background()
	m := exampleLedger(3)
	origin := ledger.Origin("clearance.example", "org-1")
	c, err := ledger.Seal(ctx, m, exampleKey(), origin, ledger.SealOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(c.Note))
	// Output:
	// clearance.example/ledger/org-1
	// 3
	// NJl3UvUnAr8KIwAQ4gM7UM4F09KUpr8ddF6CxxAz1gY=
	//
	// — clearance.example/ledger nSq6J1NDtVP8sH4hpse4siqcmRvhqq8E0vOWRhJR3GnSayitPTYMe4DY3VyoTPOi3MAkHKmqbmo/2Svp/06pDPNyAwI=
}

// An auditor holding only the verifier key checks, offline, that an entry
// is in the signed log.
func ExampleVerifyAnchor() {
	ctx := context.Background()
	m := exampleLedger(5)
	origin := ledger.Origin("clearance.example", "org-1")
	if _, err := ledger.Seal(ctx, m, exampleKey(), origin, ledger.SealOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	a, err := ledger.NewAnchor(ctx, m, "org-1", 2) // served with the dossier of entry 2
	if err != nil {
		fmt.Println(err)
		return
	}

	vkey := exampleKey().VerifierKey() // published
	c, err := ledger.VerifyAnchor(vkey, origin, m.entries[1], a)
	fmt.Println(c.Size, len(a.InclusionProof), err)

	forged := m.entries[1]
	forged.SubjectID = "dossier-9"
	_, err = ledger.VerifyAnchor(vkey, origin, forged, a)
	fmt.Println(err != nil)
	// Output:
	// 5 3 <nil>
	// true
}

// Proofs between two checkpoints show the log only grew.
func ExampleVerifyConsistency() {
	ctx := context.Background()
	k := exampleKey()
	m := exampleLedger(3)
	origin := ledger.Origin("clearance.example", "org-1")
	old, _ := ledger.Seal(ctx, m, k, origin, ledger.SealOptions{})
	exampleAppend(m, 4)
	cur, _ := ledger.Seal(ctx, m, k, origin, ledger.SealOptions{})

	p, err := ledger.ConsistencyProof(ctx, m, "org-1", old.Size, cur.Size)
	if err != nil {
		fmt.Println(err)
		return
	}
	oldCP, _ := ledger.VerifyCheckpoint(k.VerifierKey(), old.Note)
	curCP, _ := ledger.VerifyCheckpoint(k.VerifierKey(), cur.Note)
	fmt.Println(oldCP.Size, curCP.Size, ledger.VerifyConsistency(oldCP, curCP, p))
	// Output:
	// 3 7 <nil>
}

// Cutting the tail off and moving the head back leaves a valid chain;
// the signed checkpoint says the log was longer.
func ExampleVerifyWith() {
	ctx := context.Background()
	k := exampleKey()
	m := exampleLedger(4)
	origin := ledger.Origin("clearance.example", "org-1")
	if _, err := ledger.Seal(ctx, m, k, origin, ledger.SealOptions{}); err != nil {
		fmt.Println(err)
		return
	}

	m.entries = m.entries[:2]                                       // delete entries 3 and 4 ...
	m.head = ledger.Head{Seq: 2, EntryHash: m.entries[1].EntryHash} // ... and rewrite the head

	rep, _ := ledger.Verify(ctx, m, "org-1")
	fmt.Println(rep.Valid)
	rep, _ = ledger.VerifyWith(ctx, m, "org-1", ledger.VerifyOptions{VerifierKey: k.VerifierKey(), Origin: origin})
	fmt.Println(rep.Valid, rep.FirstBrokenSeq, rep.Reason)
	// Output:
	// true
	// false 3 TRUNCATED_BEFORE_CHECKPOINT
}

// The anchor's wire form: hashes in base64, the checkpoint as its note.
func ExampleNewAnchor() {
	ctx := context.Background()
	m := exampleLedger(2)
	if _, err := ledger.Seal(ctx, m, exampleKey(), ledger.Origin("clearance.example", "org-1"), ledger.SealOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	a, err := ledger.NewAnchor(ctx, m, "org-1", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := json.MarshalIndent(a, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "seq": 1,
	//   "leaf_hash": "VPhIDVQRb7CaoXeSZQjPuuK38FRL47BGGiOi+EJGMsA=",
	//   "checkpoint": "clearance.example/ledger/org-1\n2\nFmpQM8UDpEU4wnXErGENTlkMT6nC5VtBwoe615Cux5w=\n\n— clearance.example/ledger nSq6JxyT+khvWoq5y4q/n1acZabjOscMEfTP7S0oADMHBVvr23ClbATBnRQAKeK3rQfHQvaP54BhXsa7OBrgR/m9+Q8=\n",
	//   "inclusion_proof": [
	//     "81/Kcbbr6LbDVNba13hQrgj0Yx/1lcvejriRKOWH9tA="
	//   ]
	// }
}

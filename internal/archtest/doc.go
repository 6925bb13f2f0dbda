// Package archtest keeps the layers of DESIGN §2 honest. Its table is an
// allow-list: every package directory of the module is placed in a layer
// (leaf ← pure ← records ← storage ← kernel ← features ← facade ← wire ←
// cmd, with backends, examples and test support beside them), and a layer
// names the layers it may import. Its test parses every non-test Go file
// and fails on a package the table does not list, a listed package that no
// longer exists, an import the table does not allow, and, in pure packages,
// on I/O, storage or randomness imports and on reading or waiting on the
// clock (time.Now, Since, Until, After, Tick, NewTicker, NewTimer,
// AfterFunc, Sleep). A leaf marked io (internal/outbound, the outbound HTTP
// client) is exempt from that discipline, and no pure package may import
// it. The checker takes a root directory, and a test runs it
// on a small planted module to show each rule reports what it should.
//
// A new folder is placed in the table on purpose, in the same change.
package archtest

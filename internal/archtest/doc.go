// Package archtest keeps the import arrows of the design honest: pure
// packages ← stateful packages ← engine ← server ← cmd. Its test parses
// every non-test Go file of the module and fails on a forbidden import or,
// in pure packages, on reading the clock or global randomness directly.
package archtest

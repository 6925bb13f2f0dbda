package sharelink

// Hooks for the package's external tests.

// MAC is the MAC of a link of dossierID with payload, for tests that build
// tokens by hand (a version 1 link, a grants byte the server never sets).
func (s *Service) MAC(dossierID string, payload []byte) []byte { return s.shareMAC(dossierID, payload) }

// PublicError is publicError.
var PublicError = publicError

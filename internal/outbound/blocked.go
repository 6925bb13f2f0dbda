package outbound

import "net/netip"

// blocked4 are the IPv4 ranges no outbound request may reach: everything
// IANA's special-purpose registry (RFC 6890 and successors) marks as not
// globally reachable, plus multicast and the reserved class E.
var blocked4 = prefixes(
	"0.0.0.0/8",       // "this network" (RFC 791), 0.0.0.0 unspecified among them
	"10.0.0.0/8",      // private (RFC 1918)
	"100.64.0.0/10",   // shared address space, carrier-grade NAT (RFC 6598)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local (RFC 3927), cloud metadata 169.254.169.254
	"172.16.0.0/12",   // private (RFC 1918)
	"192.0.0.0/24",    // IETF protocol assignments (RFC 6890)
	"192.0.2.0/24",    // documentation, TEST-NET-1 (RFC 5737)
	"192.88.99.0/24",  // 6to4 relay anycast, deprecated (RFC 7526)
	"192.168.0.0/16",  // private (RFC 1918)
	"198.18.0.0/15",   // benchmarking (RFC 2544)
	"198.51.100.0/24", // documentation, TEST-NET-2
	"203.0.113.0/24",  // documentation, TEST-NET-3
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved (class E), 255.255.255.255 broadcast among them
)

// IPv6 ranges judged by the IPv4 address they embed, each at the position
// its RFC puts it.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")   // well-known NAT64 prefix (RFC 6052): v4 in the last 32 bits
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48") // local-use NAT64 (RFC 8215): read as a /96 prefix, like 64:ff9b::/96
	sixToFour  = netip.MustParsePrefix("2002::/16")      // 6to4 (RFC 3056): v4 in bits 16-47
)

// global6 is the global unicast space (RFC 4291 §2.4, IANA): every IPv6
// address outside it is refused (unspecified, loopback, IPv4-compatible
// ::/96, discard-only 100::/64, unique local fc00::/7 with the IPv6 metadata
// address fd00:ec2::254, link-local fe80::/10, site-local fec0::/10,
// multicast ff00::/8, …) except the embedding ranges above.
var global6 = netip.MustParsePrefix("2000::/3")

// blocked6 are the parts of global6 that are not globally reachable.
var blocked6 = prefixes(
	"2001::/23",     // IETF protocol assignments (RFC 2928): Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID, AS112, …
	"2001:db8::/32", // documentation (RFC 3849)
	"3fff::/20",     // documentation (RFC 9637)
)

func prefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Blocked reports whether addr is a destination outbound requests must not
// reach (unless Options.AllowPrivate): an invalid address; in IPv4 the
// "this network" 0.0.0.0/8, private (RFC 1918), carrier-grade NAT
// 100.64.0.0/10, loopback, link-local (cloud metadata 169.254.169.254
// among it), 192.0.0.0/24, the documentation ranges, the 6to4 relay
// anycast 192.88.99.0/24, benchmarking 198.18.0.0/15, multicast and
// 240.0.0.0/4 with the broadcast address; in IPv6 everything outside the
// global unicast space 2000::/3 (loopback, unspecified, IPv4-compatible
// ::/96, unique local fc00::/7 with fd00:ec2::254, link-local, multicast,
// …), the IETF protocol assignments 2001::/23 (Teredo 2001::/32 among them)
// and the documentation ranges 2001:db8::/32 and 3fff::/20.
//
// IPv6 addresses that wrap an IPv4 address are judged by the address they
// wrap: IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96 and 64:ff9b:1::/48
// (the IPv4 address in the last 32 bits) and 6to4 2002::/16 (in bits
// 16-47). A zone is ignored. NAT64 through any other, network-specific
// prefix cannot be recognized from the address: the network's own egress
// rules must cover it.
func Blocked(addr netip.Addr) bool {
	if !addr.IsValid() {
		return true
	}
	addr = addr.WithZone("")
	if addr.Is4() {
		return inAny(addr, blocked4)
	}
	if addr.Is4In6() {
		return inAny(addr.Unmap(), blocked4)
	}
	b := addr.As16()
	switch {
	case nat64.Contains(addr), nat64Local.Contains(addr):
		return inAny(netip.AddrFrom4([4]byte(b[12:16])), blocked4)
	case sixToFour.Contains(addr):
		return inAny(netip.AddrFrom4([4]byte(b[2:6])), blocked4)
	case !global6.Contains(addr):
		return true
	}
	return inAny(addr, blocked6)
}

package outbound_test

import (
	"net/netip"
	"testing"

	"github.com/clearancehq/clearance/internal/outbound"
)

func TestBlocked(t *testing.T) {
	tests := []struct {
		addr    string
		blocked bool
	}{
		// IPv4, public
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"93.184.216.34", false},
		{"100.63.255.255", false}, // just below CGNAT
		{"100.128.0.0", false},    // just above CGNAT
		{"172.15.255.255", false},
		{"172.32.0.0", false},
		{"192.0.1.255", false},
		{"192.167.255.255", false},
		{"198.17.255.255", false},
		{"198.20.0.0", false},
		{"223.255.255.255", false},
		{"169.253.255.255", false},
		{"11.0.0.0", false},
		{"126.255.255.255", false},
		{"128.0.0.0", false},
		// IPv4, blocked
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"0.255.255.255", true},
		{"10.0.0.0", true},
		{"10.255.255.255", true},
		{"100.64.0.0", true},
		{"100.127.255.255", true},
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"169.254.0.1", true},
		{"169.254.169.254", true}, // cloud metadata
		{"172.16.0.0", true},
		{"172.31.255.255", true},
		{"192.0.0.1", true},
		{"192.0.0.170", true}, // NAT64 discovery
		{"192.0.2.1", true},
		{"192.88.99.1", true},
		{"192.168.0.1", true},
		{"192.168.255.255", true},
		{"198.18.0.0", true},
		{"198.19.255.255", true},
		{"198.51.100.7", true},
		{"203.0.113.9", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		// IPv6, public
		{"2001:4860:4860::8888", false},
		{"2606:4700:4700::1111", false},
		{"2a00:1450:4001:80b::200e", false},
		{"2001:200::1", false}, // just above 2001::/23
		{"3ffe::1", false},
		// IPv6, blocked
		{"::", true},
		{"::1", true},
		{"::2", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"febf::1", true},
		{"fec0::1", true}, // site-local, deprecated
		{"fc00::1", true},
		{"fd12:3456:789a::1", true},
		{"fd00:ec2::254", true}, // AWS metadata over IPv6
		{"ff02::1", true},
		{"ff0e::1", true},
		{"100::1", true}, // discard-only
		{"1::1", true},
		{"4000::1", true}, // outside 2000::/3
		{"2001::1", true}, // Teredo
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true},
		{"2001:2::1", true},  // benchmarking
		{"2001:10::1", true}, // ORCHID
		{"2001:db8::1", true},
		{"3fff::1", true},
		// IPv4-mapped: judged by the IPv4 address
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.1.2.3", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:0.0.0.0", true},
		{"::ffff:8.8.8.8", false},
		// IPv4-compatible ::/96: refused whatever it wraps
		{"::127.0.0.1", true},
		{"::8.8.8.8", true},
		// NAT64, well-known and local-use
		{"64:ff9b::127.0.0.1", true},
		{"64:ff9b::10.0.0.1", true},
		{"64:ff9b::169.254.169.254", true},
		{"64:ff9b::8.8.8.8", false},
		{"64:ff9b:1::192.168.1.1", true},
		{"64:ff9b:1::8.8.8.8", false},
		{"64:ff9b:1:ffff::8.8.8.8", false},
		{"64:ff9b:2::8.8.8.8", true}, // not a NAT64 prefix, outside 2000::/3
		// 6to4: the IPv4 address in bits 16-47
		{"2002:7f00:1::1", true},     // 127.0.0.1
		{"2002:a9fe:a9fe::1", true},  // 169.254.169.254
		{"2002:c0a8:101::1", true},   // 192.168.1.1
		{"2002:0a00:0001::", true},   // 10.0.0.1
		{"2002:0808:0808::1", false}, // 8.8.8.8
	}
	for _, tt := range tests {
		addr, err := netip.ParseAddr(tt.addr)
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		if got := outbound.Blocked(addr); got != tt.blocked {
			t.Errorf("Blocked(%s) = %v, want %v", tt.addr, got, tt.blocked)
		}
	}
	if !outbound.Blocked(netip.Addr{}) {
		t.Error("the zero Addr must be blocked")
	}
}

// TestBlockedWrappersAgreeWithIPv4 checks every wrapper form against the
// IPv4 address it wraps, over one address of each IPv4 range and a few
// public ones.
func TestBlockedWrappersAgreeWithIPv4(t *testing.T) {
	v4s := []string{"0.0.0.1", "10.9.8.7", "100.100.0.1", "127.0.0.1", "169.254.169.254", "172.20.0.1",
		"192.0.0.8", "192.0.2.200", "192.88.99.2", "192.168.10.10", "198.18.5.5", "198.51.100.1",
		"203.0.113.254", "224.0.0.251", "240.1.1.1", "255.255.255.255",
		"8.8.4.4", "52.94.76.1", "151.101.1.69"}
	for _, s := range v4s {
		v4 := netip.MustParseAddr(s)
		want := outbound.Blocked(v4)
		b := v4.As4()
		var mapped, nat, natLocal, six [16]byte
		mapped = netip.AddrFrom4(b).As16() // ::ffff:a.b.c.d
		copy(nat[:], netip.MustParseAddr("64:ff9b::").AsSlice())
		copy(nat[12:], b[:])
		copy(natLocal[:], netip.MustParseAddr("64:ff9b:1::").AsSlice())
		copy(natLocal[12:], b[:])
		copy(six[:], netip.MustParseAddr("2002::").AsSlice())
		copy(six[2:], b[:])
		six[15] = 1
		for name, a := range map[string][16]byte{"mapped": mapped, "NAT64": nat, "local NAT64": natLocal, "6to4": six} {
			if got := outbound.Blocked(netip.AddrFrom16(a)); got != want {
				t.Errorf("%s form %s of %s: Blocked = %v, the IPv4 address gives %v", name, netip.AddrFrom16(a), s, got, want)
			}
		}
	}
}

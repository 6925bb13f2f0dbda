package outbound

import "context"

// SetHosts makes c dial to[host] instead of host: the tests' stand-in for
// a DNS answer (a name that passes CheckURL and resolves to loopback).
// It must be called before c's first request.
func SetHosts(c *Client, to map[string]string) { c.hosts = to }

// Control runs c's dial guard on a resolved address.
func Control(c *Client, network, address string) error {
	return c.control(context.Background(), network, address, nil)
}

package lock

import "time"

// Client returns the Client the Mutex was made by (nil for a nil Mutex).
// Package multilock uses it to tell masters apart and to name them.
func (m *Mutex) Client() *Client {
	if m == nil || !m.c.valid() {
		return nil
	}
	return m.c
}

// WatchdogTimeout returns the lease of locks taken without the Lease
// option: Config.WatchdogTimeout after defaults (0 for a nil or zero
// Client). Package multilock needs it to compute a lock's validity.
func (c *Client) WatchdogTimeout() time.Duration {
	if !c.valid() {
		return 0
	}
	return c.cfg.WatchdogTimeout
}

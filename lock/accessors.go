package lock

// Client returns the Client the Mutex was made by (nil for a nil Mutex).
// Package multilock uses it to tell masters apart and to name them.
func (m *Mutex) Client() *Client {
	if m == nil || !m.c.valid() {
		return nil
	}
	return m.c
}

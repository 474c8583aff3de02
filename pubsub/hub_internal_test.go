package pubsub

import (
	"testing"
	"time"
)

// The reconnect delay starts at 20ms (±50% jitter), not at the backoff
// library's default of 500ms: NewExponentialBackOff computes its first
// interval before the fields can be changed.
func TestReconnectBackoffStartsAt20ms(t *testing.T) {
	h := New(nil, Options{})
	if d := h.bo.NextBackOff(); d < 10*time.Millisecond || d > 30*time.Millisecond {
		t.Fatalf("first reconnect delay %v, want 20ms ± 50%%", d)
	}
	for range 20 {
		h.bo.NextBackOff()
	}
	if d := h.bo.NextBackOff(); d > 3*time.Second {
		t.Fatalf("reconnect delay %v, want at most 2s + 50%%", d)
	}
}

package lock

import (
	"testing"
	"unsafe"
)

// TestHoldStateSizes keeps what every held lock costs in its size
// class (on 64-bit platforms): a Held in 128 bytes, a hold in 144
// (112 until the fair lock's pointer to its queue state, 128 until the
// hold had its env and its protocol rather than its Client and a kind
// byte), the owner's context in 24. Ten thousand held locks keep ten thousand
// of each (BenchmarkHeld measures the whole).
func TestHoldStateSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit platforms")
	}
	for _, s := range []struct {
		what      string
		size, max uintptr
	}{
		{"Held", unsafe.Sizeof(Held{}), 128},
		{"hold", unsafe.Sizeof(hold{}), 144},
		{"ownerCtx", unsafe.Sizeof(ownerCtx{}), 24},
	} {
		if s.size > s.max {
			t.Errorf("%s is %d bytes, more than %d", s.what, s.size, s.max)
		}
	}
}

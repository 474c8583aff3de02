package watchdog

import (
	"testing"
	"unsafe"
)

// TestEntrySize keeps an Entry, one per held lock, within 96 bytes on
// 64-bit platforms: times as mono, small counters packed.
func TestEntrySize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit platforms")
	}
	if s := unsafe.Sizeof(Entry{}); s > 96 {
		t.Errorf("Entry is %d bytes, more than 96", s)
	}
}

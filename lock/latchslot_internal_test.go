package lock

import (
	"slices"
	"testing"
	"time"

	"github.com/rlock-go/rlock/pubsub"
)

// bySlot keeps the latches of one slot together, in the order the slots
// first appear; keys of one hash tag share a slot.
func TestLatchesBySlot(t *testing.T) {
	now := time.Now()
	keys := []string{"l:{a}:1", "l:{b}:1", "m:{a}:2", "l:{}:1", "l:{}:2", "n:{b}:2"}
	if pubsub.Slot("l:{}:1") == pubsub.Slot("l:{}:2") || pubsub.Slot("l:{a}:1") == pubsub.Slot("l:{b}:1") {
		t.Fatal("the keys chosen for this test share slots they should not")
	}
	var in []latch
	for _, k := range keys {
		in = append(in, latch{key: k, at: now})
	}
	var got [][]string
	for _, g := range bySlot(in) {
		var ks []string
		for _, k := range g {
			ks = append(ks, k.key)
		}
		got = append(got, ks)
	}
	want := [][]string{{"l:{a}:1", "m:{a}:2"}, {"l:{b}:1", "n:{b}:2"}, {"l:{}:1"}, {"l:{}:2"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("bySlot = %q, want %q", got, want)
	}
}

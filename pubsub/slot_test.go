package pubsub_test

import (
	"testing"

	"github.com/rlock-go/rlock/pubsub"
)

// Known slots: the Redis Cluster spec's CRC16 check value, and answers of
// a real cluster (MOVED 12182 for "foo", 5061 for "bar").
func TestSlot(t *testing.T) {
	for name, want := range map[string]uint16{
		"123456789":                    0x31C3,
		"foo":                          12182,
		"bar":                          5061,
		"{foo}.x":                      12182,
		"x{foo}y{bar}":                 12182,
		"redisson_lock__channel:{foo}": 12182,
		"{}foo":                        pubsub.Slot("{}foo"), // empty tag: the whole name
	} {
		if got := pubsub.Slot(name); got != want {
			t.Errorf("Slot(%q) = %d, want %d", name, got, want)
		}
	}
	if pubsub.Slot("{}foo") == pubsub.Slot("foo") {
		t.Error(`an empty hash tag "{}" must not select the rest of the name`)
	}
}

package lock

import (
	"slices"
	"testing"
	"time"
)

// hashTag follows Redis Cluster's rule; byHashTag keeps the latches of one
// tag together, in the order the tags first appear.
func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"redisson_unlock_latch:{a}:1": "a",
		"prefix:x}y{z}:1":             "z",
		"a{}b{c}":                     "a{}b{c}",
		"a{b":                         "a{b",
		"plain":                       "plain",
		"{a}{b}":                      "a",
	} {
		if got := hashTag(key); got != want {
			t.Errorf("hashTag(%q) = %q, want %q", key, got, want)
		}
	}
	now := time.Now()
	var in []latch
	for _, k := range []string{"l:{a}:1", "l:{b}:1", "l:{a}:2", "l:{}:1", "l:{}:2", "l:{b}:2"} {
		in = append(in, latch{key: k, at: now})
	}
	var got [][]string
	for _, g := range byHashTag(in) {
		var keys []string
		for _, k := range g {
			keys = append(keys, k.key)
		}
		got = append(got, keys)
	}
	want := [][]string{{"l:{a}:1", "l:{a}:2"}, {"l:{b}:1", "l:{b}:2"}, {"l:{}:1"}, {"l:{}:2"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("byHashTag = %q, want %q", got, want)
	}
}

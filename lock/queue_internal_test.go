package lock

import "testing"

// A queue's key names its channel without building it: two keys are
// equal exactly when their channels are, whatever the kinds and names
// ("x" and "{x}" share one), so the waiters of one channel form one queue
// with one subscription, and a release wakes those that listen on its
// channel and no others. (A review found "x" and "{x}" keyed apart: a
// release of one could wake the other's head, which used the wake-up, and
// leave the first asleep on a free lock.)
func TestChanKeyNamesTheChannel(t *testing.T) {
	kinds := []*protocol{plainProtocol, nonReentrantProtocol, spinProtocol, readProtocol, writeProtocol, fairProtocol}
	// Names whose channels coincide ("a" and "{a}"; "a}b" and "{a}b}")
	// or nearly do.
	names := []string{"a", "b", "{a}", "{a}b", "a{b}", "{a}}", "a}", "{a}b}", "a}b", "{{a}}", "{a", "{", "}", "{}", ""}
	for _, m := range names {
		for _, n := range names {
			for _, p := range kinds {
				for _, q := range kinds {
					if sameKey, sameChan := p.chanKey(m) == q.chanKey(n), p.channel(m) == q.channel(n); sameKey != sameChan {
						t.Errorf("%s %q and %s %q: keys equal %v, channels equal %v (%s, %s)", p.name, m, q.name, n, sameKey, sameChan, p.channel(m), q.channel(n))
					}
				}
			}
		}
	}
}

package lock

import "testing"

// A queue's key names its channel without building it: two kinds' keys
// of one name are equal exactly when their channels are, so a release of
// one kind wakes the waiters that listen on its channel, whatever their
// kind, and no others.
func TestChanKeyNamesTheChannel(t *testing.T) {
	kinds := []*protocol{plainProtocol, nonReentrantProtocol, spinProtocol, readProtocol, writeProtocol, fairProtocol}
	for _, name := range []string{"a", "{a}b"} {
		for _, p := range kinds {
			for _, q := range kinds {
				if sameKey, sameChan := p.chanKey(name) == q.chanKey(name), p.channel(name) == q.channel(name); sameKey != sameChan {
					t.Errorf("%q: %s and %s: keys equal %v, channels equal %v (%s, %s)", name, p.name, q.name, sameKey, sameChan, p.channel(name), q.channel(name))
				}
			}
		}
	}
	if plainProtocol.chanKey("a") == plainProtocol.chanKey("b") {
		t.Error("two names' keys are equal")
	}
}

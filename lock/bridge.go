package lock

import (
	"github.com/rlock-go/rlock/internal/bridge"
	"github.com/rlock-go/rlock/reentrant"
)

func init() {
	bridge.HeldBy = func(m any, owner uint64) bool { return m.(*Mutex).heldBy(owner) }
}

// heldBy reports whether the Client holds m's lock for owner.
func (m *Mutex) heldBy(owner uint64) bool {
	if m == nil || !m.c.valid() {
		return false
	}
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.ledgers[key(m.name, reentrant.Field(c.id, owner))]
	return l != nil && len(l.helds) > 0
}

// Package line is the FIFO line of a process's waiters for one lock,
// shared by package lock's queue (one lock name on one Client) and package
// multilock's (one multi-master lock): the first member is the head, and
// when it leaves the next one becomes head. A Line has no lock of its
// own: its owner guards it with the same mutex as the state that goes
// with it (the queue's subscription), so that "the last member left" and
// what follows from it happen in one step.
package line

// Line is the members in arrival order. The zero Line is empty.
type Line struct {
	members []*Member
}

// Member is one waiting call.
type Member struct {
	head chan struct{}
}

// Head is closed when the member becomes the head.
func (m *Member) Head() <-chan struct{} { return m.head }

// IsHead reports whether the member heads its line now.
func (m *Member) IsHead() bool {
	select {
	case <-m.head:
		return true
	default:
		return false
	}
}

// Join adds a member at the end; the first member is head at once.
func (l *Line) Join() *Member {
	m := &Member{head: make(chan struct{})}
	l.members = append(l.members, m)
	if len(l.members) == 1 {
		close(m.head)
	}
	return m
}

// Leave removes m (the next member becomes head when m was head) and
// reports whether the line is now empty. Leaving twice is harmless.
func (l *Line) Leave(m *Member) (empty bool) {
	for i, x := range l.members {
		if x == m {
			l.members = append(l.members[:i:i], l.members[i+1:]...)
			if i == 0 && len(l.members) > 0 {
				close(l.members[0].head)
			}
			break
		}
	}
	return len(l.members) == 0
}

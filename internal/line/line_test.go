package line

import "testing"

func isHead(m *Member) bool {
	select {
	case <-m.Head():
		return true
	default:
		return false
	}
}

// The head is the first member; leaving hands the head on in arrival
// order, and a member that leaves from the middle passes nothing on.
func TestLineOrder(t *testing.T) {
	var l Line
	a, b, c := l.Join(), l.Join(), l.Join()
	if !isHead(a) || isHead(b) || isHead(c) {
		t.Fatal("only the first member is head")
	}
	if l.Leave(b) || isHead(c) {
		t.Fatal("a member leaving from the middle made c head, or emptied the line")
	}
	if l.Leave(a) || !isHead(c) {
		t.Fatal("c is not head after a left")
	}
	if !l.Leave(c) {
		t.Fatal("the line is not empty after its last member left")
	}
	if !l.Leave(c) {
		t.Fatal("leaving twice is not harmless")
	}
	if d := l.Join(); !isHead(d) {
		t.Fatal("a member joining an empty line is not head")
	}
}

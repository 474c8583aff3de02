package line

import "testing"

// The head is the first member; leaving hands the head on in arrival
// order, and a member that leaves from the middle passes nothing on.
func TestLineOrder(t *testing.T) {
	var l Line
	a, b, c := l.Join(), l.Join(), l.Join()
	if !a.IsHead() || b.IsHead() || c.IsHead() {
		t.Fatal("only the first member is head")
	}
	if l.Leave(b) || c.IsHead() {
		t.Fatal("a member leaving from the middle made c head, or emptied the line")
	}
	if l.Leave(a) || !c.IsHead() {
		t.Fatal("c is not head after a left")
	}
	if !l.Leave(c) {
		t.Fatal("the line is not empty after its last member left")
	}
	if !l.Leave(c) {
		t.Fatal("leaving twice is not harmless")
	}
	if d := l.Join(); !d.IsHead() {
		t.Fatal("a member joining an empty line is not head")
	}
}

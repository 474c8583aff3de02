package lockcore

import (
	"strings"
	"testing"
)

// Get returns the hooks registered with the types asked for, and refuses
// other types at once, naming both.
func TestGetChecksTheTypes(t *testing.T) {
	defer func(h any) { hooks = h }(hooks)
	type m struct{ name string }
	Register(Hooks[*m, int, string]{HeldBy: func(x *m, owner uint64) bool { return x.name == "a" && owner == 1 }})
	if h := Get[*m, int, string](); !h.HeldBy(&m{"a"}, 1) {
		t.Fatal("Get did not return the hooks registered")
	}
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, ",int,string], not lockcore.Hooks[") || !strings.HasSuffix(s, ",int,bool]") {
			t.Fatalf("Get with other types: recovered %v", r)
		}
	}()
	Get[*m, int, bool]()
}

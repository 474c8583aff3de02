package reentrant_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/rlock-go/rlock/reentrant"
)

// No script of one kind takes or counts a hash laid out for another kind,
// not even in its "this request already ran" branch: a field that holds
// the lock in a read-write hash ('mode' set) is no hold of the plain or
// fair lock, and one in a plain hash (no 'mode') is no read or write hold.
// Every pair is tried with the field already there (count 1) and the
// client knowing none (Known 0): the "already ran" answer an adoption of
// that field would get.
func TestScriptsDoNotCountAnotherKindsHash(t *testing.T) {
	rc := client(t)
	field := reentrant.Field(reentrant.NewClientID(), 1)
	layouts := []struct {
		name  string
		hash  []string         // HSET arguments after the key: the other kind's layout
		modes []reentrant.Mode // the kinds that must not count it
		field func(reentrant.Mode) string
	}{
		{"read-write hash", []string{"mode", "read", field, "1"}, []reentrant.Mode{reentrant.ModeLock, reentrant.ModeFair}, func(reentrant.Mode) string { return field }},
		{"write hash", []string{"mode", "write", reentrant.WriterField(field), "1", field, "1"}, []reentrant.Mode{reentrant.ModeLock, reentrant.ModeFair}, func(reentrant.Mode) string { return field }},
		{"plain hash", []string{field, "1"}, []reentrant.Mode{reentrant.ModeRead}, func(reentrant.Mode) string { return field }},
		{"plain hash, writer's field", []string{reentrant.WriterField(field), "1"}, []reentrant.Mode{reentrant.ModeWrite}, func(reentrant.Mode) string { return reentrant.WriterField(field) }},
	}
	for _, l := range layouts {
		for _, mode := range l.modes {
			t.Run(l.name+"/"+mode.String(), func(t *testing.T) {
				key := "layout:" + strconv.FormatInt(time.Now().UnixNano(), 36)
				args := append([]string{"HSET", key}, l.hash...)
				must(t, rc.Do(bg(), rc.B().Arbitrary(args...).Build()).Error())
				must(t, rc.Do(bg(), rc.B().Pexpire().Key(key).Milliseconds(30000).Build()).Error())
				defer rc.Do(bg(), rc.B().Del().Key(key).Build())
				before, err := rc.Do(bg(), rc.B().Hgetall().Key(key).Build()).AsStrMap()
				must(t, err)

				req := reentrant.AcquireRequest{Name: key, Field: l.field(mode), Lease: 10 * time.Second, Known: 0,
					RequestID: reentrant.NewRequestID(), Mode: mode, Wait: time.Second, Queue: true}
				res, err := req.Run(bg(), rc)
				must(t, err)
				if res.Status != reentrant.Busy {
					t.Fatalf("a %s acquire on a %s answered %v (count %d), want busy", mode, l.name, res.Status, res.Count)
				}
				rel := reentrant.Release{Name: key, Field: l.field(mode), Lease: 10 * time.Second, RequestID: reentrant.NewRequestID(),
					Publish: reentrant.Publish, LatchTTL: time.Second, Mode: mode}
				if mode != reentrant.ModeWrite { // a writer's field exists only in write mode
					out, err := rel.Run(bg(), rc)
					must(t, err)
					if out != reentrant.NotHeld {
						t.Fatalf("a %s release on a %s answered %v, want not held", mode, l.name, out)
					}
				}
				after, err := rc.Do(bg(), rc.B().Hgetall().Key(key).Build()).AsStrMap()
				must(t, err)
				if len(after) != len(before) {
					t.Fatalf("the %s changed: %v, then %v", l.name, before, after)
				}
				for k, v := range before {
					if after[k] != v {
						t.Fatalf("the %s changed: %v, then %v", l.name, before, after)
					}
				}
			})
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

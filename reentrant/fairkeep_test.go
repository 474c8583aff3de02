package reentrant_test

import (
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/reentrant"
)

// A fair give-back that keeps its place (Release.KeepPlace, issue 29
// stage 4) undoes its grant: the field heads the queue again, and the
// waiters behind it get back the wait the grant took off their timeouts,
// so a grant, a give-back and a grant again lower them by one wait, as
// one grant does; nobody is woken. A plain release wakes the head.
func TestFairGiveBackKeepsItsPlace(t *testing.T) {
	rc := client(t)
	name := "fairkeep:" + reentrant.NewRequestID()
	a, b := reentrant.Field(reentrant.NewClientID(), 1), reentrant.Field(reentrant.NewClientID(), 2)
	wait := 5 * time.Second
	acquire := func(field string) reentrant.AcquireResult {
		t.Helper()
		res, err := reentrant.AcquireRequest{Name: name, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID(),
			Mode: reentrant.ModeFair, Queue: true, Wait: wait}.Run(bg(), rc)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	score := func(field string) int64 {
		t.Helper()
		s, err := rc.Do(bg(), rc.B().Zscore().Key(reentrant.FairTimeoutName(name)).Member(field).Build()).AsInt64()
		if err != nil {
			t.Fatalf("zscore %s: %v", field, err)
		}
		return s
	}
	queue := func() []string {
		t.Helper()
		q, err := rc.Do(bg(), rc.B().Lrange().Key(reentrant.FairQueueName(name)).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	release := func(field string, keep time.Duration) (reentrant.ReleaseResult, error) {
		return reentrant.Release{Name: name, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID(),
			Publish: reentrant.Publish, LatchTTL: time.Minute, Mode: reentrant.ModeFair, KeepPlace: keep}.Run(bg(), rc)
	}
	holder := reentrant.Field(reentrant.NewClientID(), 3)
	if res := acquire(holder); res.Status != reentrant.Acquired {
		t.Fatalf("holder: %+v", res)
	}
	acquire(a)
	acquire(b)
	bJoined := score(b)
	if _, err := release(holder, 0); err != nil {
		t.Fatal(err)
	}
	if res := acquire(a); res.Status != reentrant.Acquired {
		t.Fatalf("a at the head of a free lock: %+v", res)
	}
	granted := score(b)
	if granted != bJoined-wait.Milliseconds() {
		t.Fatalf("b's timeout after a's grant = %d, want %d (lowered by one wait)", granted, bJoined-wait.Milliseconds())
	}
	res, err := release(a, wait)
	if err != nil || res != reentrant.Released {
		t.Fatalf("the give-back = %v, %v; want Released", res, err)
	}
	if q := queue(); len(q) != 2 || q[0] != a || q[1] != b {
		t.Fatalf("queue after a's give-back = %v, want [a b]", q)
	}
	if got := score(b); got != bJoined {
		t.Fatalf("b's timeout after a's give-back = %d, want %d (the grant's wait given back)", got, bJoined)
	}
	if got := acquire(b); got.Status == reentrant.Acquired {
		t.Fatal("b was granted the lock a's give-back kept for a")
	}
	if res := acquire(a); res.Status != reentrant.Acquired {
		t.Fatalf("a again: %+v", res)
	}
	if got := score(b); got != bJoined-wait.Milliseconds() {
		t.Fatalf("b's timeout after a's second grant = %d, want %d (one wait off, as after one grant)", got, bJoined-wait.Milliseconds())
	}
	if _, err := release(a, 0); err != nil {
		t.Fatal(err)
	}
	if res := acquire(b); res.Status != reentrant.Acquired {
		t.Fatalf("b after a's release: %+v", res)
	}
	rc.Do(bg(), rc.B().Del().Key(name, reentrant.FairQueueName(name), reentrant.FairTimeoutName(name)).Build())
}

// P1-77, a fair waiter's leave: a client whose ACL may not PUBLISH to
// the lock's channel still leaves the queue when it heads it and the
// lock is free (the one case a leave publishes: it wakes the next
// waiter). Before, the script failed at its PUBLISH after it had left,
// and the caller, told it had not, sent the leave again and again.
func TestLeaveFairWithoutPublishPermission(t *testing.T) {
	admin := client(t)
	for _, deny := range []string{"resetchannels", "-publish"} {
		t.Run(deny, func(t *testing.T) {
			user := "leaver" + deny
			if err := admin.Do(bg(), admin.B().Arbitrary("ACL", "SETUSER").Args(user, "reset", "on", ">pw", "~*", "&*", "+@all", deny).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.DirectAddr()}, Username: user, Password: "pw",
				ForceSingleClient: true, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			name := "leave-noperm:" + reentrant.NewRequestID()
			a, b := reentrant.Field(reentrant.NewClientID(), 1), reentrant.Field(reentrant.NewClientID(), 2)
			now := time.Now().UnixMilli()
			for i, f := range []string{a, b} {
				if err := admin.Do(bg(), admin.B().Rpush().Key(reentrant.FairQueueName(name)).Element(f).Build()).Error(); err != nil {
					t.Fatal(err)
				}
				if err := admin.Do(bg(), admin.B().Zadd().Key(reentrant.FairTimeoutName(name)).ScoreMember().ScoreMember(float64(now+int64(i+1)*60000), f).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			defer admin.Do(bg(), admin.B().Del().Key(reentrant.FairQueueName(name), reentrant.FairTimeoutName(name)).Build())
			left, err := reentrant.LeaveFair{Name: name, Field: a, Wait: time.Minute, Publish: reentrant.Publish}.Run(bg(), rc)
			if err != nil || !left {
				t.Fatalf("the head's leave of a free fair lock without PUBLISH permission = %v, %v; want true, nil", left, err)
			}
			q, err := admin.Do(bg(), admin.B().Lrange().Key(reentrant.FairQueueName(name)).Start(0).Stop(-1).Build()).AsStrSlice()
			if err != nil || len(q) != 1 || q[0] != b {
				t.Fatalf("queue after the leave = %v, %v; want [b]", q, err)
			}
		})
	}
}

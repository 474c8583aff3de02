package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// waiter is one entry of a fair lock's queue (Redisson's getFairLock).
type waiter struct {
	Field    string `json:"field"`
	ClientID string `json:"client_id"`
	OwnerID  string `json:"owner_id"`
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
	// TimeoutMillis is how long the waiter keeps its place without coming
	// back, by inspect's clock (negative: its timeout passed, and the next
	// call on the lock prunes it once it heads the queue); null when the
	// waiter has no timeout entry.
	TimeoutMillis *int64 `json:"timeout_ms"`
}

// fairQueue reads a fair lock's queue from the replies of LRANGE of the
// queue and ZRANGE WITHSCORES of the timeouts.
func fairQueue(list, timeouts rueidis.RedisResult, now time.Time) ([]waiter, error) {
	fields, err := list.AsStrSlice()
	if err != nil {
		return nil, err
	}
	scores, err := timeouts.AsZScores()
	if err != nil {
		return nil, err
	}
	byField := make(map[string]int64, len(scores))
	for _, s := range scores {
		byField[s.Member] = int64(s.Score)
	}
	ws := make([]waiter, 0, len(fields))
	for _, f := range fields {
		w := waiter{Field: f}
		w.ClientID, w.OwnerID, _ = splitField(f)
		if host, pid, ok := parseClientID(w.ClientID); ok {
			w.Host, w.PID = host, pid
		}
		if t, ok := byField[f]; ok {
			left := t - now.UnixMilli()
			w.TimeoutMillis = &left
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// warnFair flags a fair queue whose head's timeout passed while the lock
// is free: everyone behind it waits until some call prunes it.
func warnFair(info *lockInfo) {
	if len(info.FairQueue) == 0 || info.Locked {
		return
	}
	if h := info.FairQueue[0]; h.TimeoutMillis != nil && *h.TimeoutMillis < 0 {
		info.Warnings = append(info.Warnings, fmt.Sprintf(
			"the fair queue's head %s timed out %v ago while the lock is free: the next acquire or release of any client prunes it", h.Field, time.Duration(-*h.TimeoutMillis)*time.Millisecond))
	}
}

// printFair prints a fair lock's queue.
func printFair(w io.Writer, info *lockInfo) {
	if len(info.FairQueue) == 0 {
		return
	}
	fmt.Fprintf(w, "  fair queue:\t%d waiting, in order (%s)\n", len(info.FairQueue), info.QueueKey)
	for i, q := range info.FairQueue {
		timeout := "no timeout entry"
		if q.TimeoutMillis != nil {
			timeout = "keeps its place for " + (time.Duration(*q.TimeoutMillis) * time.Millisecond).String()
			if *q.TimeoutMillis < 0 {
				timeout = "timed out " + (time.Duration(-*q.TimeoutMillis) * time.Millisecond).String() + " ago"
			}
		}
		fmt.Fprintf(w, "    waiter %s:\tclient %s  owner %s  %s\n", strconv.Itoa(i+1), orDash(q.ClientID), orDash(q.OwnerID), timeout)
		if q.Host != "" {
			fmt.Fprintf(w, "    \trlock on host %s, pid %d\n", q.Host, q.PID)
		}
	}
}

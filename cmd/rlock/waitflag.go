package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// waitValue is --wait: a Go duration ("90s", "2m"), flock's bare seconds
// ("5", "0.5"), or "forever".
type waitValue struct {
	d       time.Duration
	forever bool
}

// waitForever is the --wait value that waits until the lock is free.
const waitForever = "forever"

func (w *waitValue) String() string {
	if w == nil {
		return "0"
	}
	if w.forever {
		return waitForever
	}
	return w.d.String()
}

func (w *waitValue) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == waitForever {
		*w = waitValue{forever: true}
		return nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		*w = waitValue{d: d}
		return nil
	}
	// flock's -w SECONDS: a bare number, fractions allowed.
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("want a duration (30s, 2m), seconds (5, 0.5) or %q", waitForever)
	}
	if f*float64(time.Second) > math.MaxInt64 || f*float64(time.Second) < math.MinInt64 {
		return fmt.Errorf("%s seconds is out of range", s)
	}
	*w = waitValue{d: time.Duration(f * float64(time.Second))}
	return nil
}

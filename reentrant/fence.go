package reentrant

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

//go:embed fence_raise.lua
var fenceRaiseSrc string

// FenceRaiseScript raises a fencing counter to at least a given token.
var FenceRaiseScript = newScript(fenceRaiseSrc)

// RaiseFence sets the fencing counter of the lock name,
// TokenName(name), to max(its value, token) and returns the value it
// holds afterwards (never less than token). A missing counter becomes
// token. Counters only ever go up, so raising one on a master whose lock
// another client holds is harmless: that holder's next acquisition gets
// a token above it.
//
// Package multilock uses it to write the highest token seen on a quorum
// back to the masters, so that every later quorum meets a master whose
// counter is at least that token.
func RaiseFence(ctx context.Context, c rueidis.Client, name string, token uint64) (uint64, error) {
	res := FenceRaiseScript.Run(ctx, c, []string{TokenName(name)}, []string{strconv.FormatUint(token, 10)})
	s, err := res.ToString()
	if err != nil {
		if res.Error() != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w: raise fence: %v", ErrUnexpectedReply, err)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: raise fence: counter %q", ErrUnexpectedReply, s)
	}
	return v, nil
}

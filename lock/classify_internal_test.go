package lock

import (
	"errors"
	"testing"
)

// Error replies that the real-server tests cannot produce cheaply
// (LOADING, a failover's MASTERDOWN, a cluster's TRYAGAIN or CLUSTERDOWN)
// are classified by their text like the ones they do produce.
func TestClassifyReply(t *testing.T) {
	for reply, want := range map[string]error{
		"LOADING Redis is loading the dataset in memory":                                                   ErrUnavailable,
		"BUSY Redis is busy running a script. You can only call SCRIPT KILL":                               ErrUnavailable,
		"READONLY You can't write against a read only replica.":                                            ErrUnavailable,
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.":                 ErrUnavailable,
		"TRYAGAIN Multiple keys request during rehashing of slot":                                          ErrUnavailable,
		"CLUSTERDOWN The cluster is down":                                                                  ErrUnavailable,
		"OOM command not allowed when used memory > 'maxmemory'. script: 1ae9, on @user_script:4.":         ErrUnavailable,
		"WRONGTYPE Operation against a key holding the wrong kind of value":                                ErrNotLock,
		"ERR rlock: hold count of the field is not an integer script: 1ae9":                                ErrNotLock,
		"ERR hash value is not an integer":                                                                 ErrNotLock,
		"NOPERM User locker has no permissions to access the 'x' channel":                                  ErrAuth,
		"WRONGPASS invalid username-password pair or user is disabled.":                                    ErrAuth,
		"NOAUTH Authentication required.":                                                                  ErrAuth,
		"The user executing the script can't publish to the channel mentioned in the command script: 4d61": ErrAuth,
		"MOVED 3999 127.0.0.1:6381":                                                                        ErrInvalid,
		"ERR DB index is out of range":                                                                     ErrInvalid,
		"ERR unknown command":                                                                              nil,
	} {
		if got := classifyReply(reply); !errors.Is(got, want) || (want == nil && got != nil) {
			t.Errorf("classifyReply(%q) = %v, want %v", reply, got, want)
		}
	}
}

package lock

import (
	"fmt"
	"unicode/utf8"
)

// badName says what makes name unfit to be a lock name, or "" if nothing.
func badName(name string) string {
	switch {
	case name == "":
		return "empty lock name"
	case len(name) > maxNameLen:
		return fmt.Sprintf("lock name of %d bytes, more than %d", len(name), maxNameLen)
	case !utf8.ValidString(name):
		return "lock name is not UTF-8"
	}
	return ""
}

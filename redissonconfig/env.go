package redissonconfig

import (
	"os"
	"regexp"
	"strings"
)

// envVar is Redisson's variable syntax in a config: ${NAME} or
// ${NAME:-default}, NAME of letters, digits, '_' and '.'.
var envVar = regexp.MustCompile(`\$\{([\w.]+)(?::-(.+?))?\}`)

// substitute replaces the variables of text as Redisson does, before the
// YAML is parsed: with the environment variable's value, else the
// default. Redisson also reads Java system properties, which a Go program
// has not, and leaves a variable it cannot resolve as it is (then sent as
// the password, say); for rlock that is an error.
func (l *loader) substitute(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, line := range lines {
		lines[i] = envVar.ReplaceAllStringFunc(line, func(m string) string {
			sub := envVar.FindStringSubmatch(m)
			if v, ok := os.LookupEnv(sub[1]); ok {
				return v
			}
			if strings.Contains(m, ":-") {
				return sub[2]
			}
			l.fail(i+1, "${"+sub[1]+"}", "the environment variable %s is not set, and the variable gives no default (${%s:-DEFAULT}): set it. "+
				"Redisson would use the text \"${%s}\" itself, as a password or an address", sub[1], sub[1], sub[1])
			return m
		})
	}
	return strings.Join(lines, "")
}

package redissonconfig

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// envVar is Redisson's variable syntax in a config: ${NAME} or
// ${NAME:-default}, NAME of letters, digits, '_' and '.'.
var envVar = regexp.MustCompile(`\$\{([\w.]+)(?::-(.+?))?\}`)

// substitute replaces the variables of text as Redisson does, before the
// YAML is parsed: with the environment variable's value, else the
// default, else not at all. Redisson also reads Java system properties,
// which a Go program has not. A variable left as it is gets a warning.
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
			l.warn(i+1, "${"+sub[1]+"}", fmt.Sprintf("the environment variable %s is not set: left as it is, as Redisson leaves it", sub[1]))
			return m
		})
	}
	return strings.Join(lines, "")
}

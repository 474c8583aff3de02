package docker_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/rlock-go/rlock/integration"
)

func TestMain(m *testing.M) {
	var opts []goleak.Option
	for _, f := range integration.IgnoreRueidis {
		opts = append(opts, goleak.IgnoreAnyFunction(f))
	}
	goleak.VerifyTestMain(m, opts...)
}

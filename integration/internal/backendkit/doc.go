// Package backendkit is what the backends of package integration share:
// server directories and their owners, free ports, readiness and the
// fake clock. The Docker backend, in the module
// github.com/rlock-go/rlock/integration/docker, uses it too; the two
// modules are released together, so this internal API may change between
// releases without a deprecation.
package backendkit

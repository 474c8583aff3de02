//go:build race

package main

// raceEnabled builds the rlock binary under test with the race detector
// too (it then exits 66 on a race, failing the test's exit-code checks).
const raceEnabled = true

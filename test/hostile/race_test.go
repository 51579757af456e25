//go:build race

package hostile

// raceEnabled: the suite runs under the race detector, so the product binary
// is built with -race as well.
const raceEnabled = true

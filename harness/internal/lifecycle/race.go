//go:build race

package lifecycle

// raceDetector: the binary was built with -race, which makes every case's
// in-process work several times slower.
const raceDetector = true

//go:build !race

package lifecycle

const raceDetector = false

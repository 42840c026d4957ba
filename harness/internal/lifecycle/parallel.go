package lifecycle

// MaxParallel bounds SearchOptions.Parallel.
const MaxParallel = 64

// DefaultParallel is harness.DefaultParallel: see its documentation there.
func DefaultParallel() int {
	if raceDetector {
		return defaultParallelRace
	}
	return defaultParallel
}

const (
	defaultParallel     = 16
	defaultParallelRace = 2
)

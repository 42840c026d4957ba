package faults

// Narrowable is a step that acts on every write, or every watch, of the
// controller's and can act on one instead: errors answered to every write
// or a crash after any write, a view stale in every watch. Aimed at the
// one that matters, it is a smaller fault, and the shrinker tries it at
// each write and watch the failing case saw (Narrowed).
type Narrowable interface {
	Step
	// Narrowed is the step at each of writes or of watched (the
	// resources the controller watched, as StaleWatch names them); none
	// when it acts on one already.
	Narrowed(writes []WriteMatch, watched []string) []Step
}

// Narrowed is s at each of writes or watched, or none (see Narrowable).
func Narrowed(s Step, writes []WriteMatch, watched []string) []Step {
	if n, ok := s.(Narrowable); ok {
		return n.Narrowed(writes, watched)
	}
	return nil
}

var (
	_ Narrowable = APIErrorsStep{}
	_ Narrowable = CrashAfterWriteStep{}
	_ Narrowable = StaleWatchStep{}
)

// Narrowed: the errors answered to one of writes only.
func (s APIErrorsStep) Narrowed(writes []WriteMatch, _ []string) []Step {
	return atEach(s.AimedWrite(), writes, func(w WriteMatch) Step {
		s.Verb, s.Resource = w.Verb, w.Resource
		return s
	})
}

// Narrowed: the crash after the counted writes of one of writes only.
func (s CrashAfterWriteStep) Narrowed(writes []WriteMatch, _ []string) []Step {
	return atEach(s.AimedWrite(), writes, func(w WriteMatch) Step {
		s.Verb, s.Resource = w.Verb, w.Resource
		return s
	})
}

// atEach is a step aimed at (every write when zero) made at each of
// writes, once each, sorted; none when it is aimed at one already.
func atEach(aimed WriteMatch, writes []WriteMatch, at func(WriteMatch) Step) []Step {
	if aimed != (WriteMatch{}) {
		return nil
	}
	var out []Step
	for _, w := range SortWrites(writes) {
		out = append(out, at(w))
	}
	return out
}

// Narrowed: one of the watched resources' watches late, or cut, only.
func (s StaleWatchStep) Narrowed(_ []WriteMatch, watched []string) []Step {
	if s.Resource != "" {
		return nil
	}
	var out []Step
	for _, r := range watched {
		s.Resource = r
		out = append(out, s)
	}
	return out
}

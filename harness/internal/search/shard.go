package search

import (
	"fmt"
	"strconv"
	"strings"
)

// A search can be cut into shards that run on many machines (a CI
// matrix, a Kubernetes Indexed Job) with no scheduler of kubeprop's own:
// plan i of a seed is the same plan wherever it is drawn, so shard I of N
// runs the plans whose index is I mod N, and the N shards of one seed
// together run the plans of the whole search. Each shard draws every
// plan (drawing is cheap; running is not), so that a plan drawn again is
// skipped in the shard that meets it as in the whole search.

// Shard is harness.Shard: see its documentation there.
type Shard struct {
	Index, Count int
}

// ParseShard reads a shard written I/N, with 0 <= I < N.
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	index, errI := strconv.Atoi(strings.TrimSpace(i))
	count, errN := strconv.Atoi(strings.TrimSpace(n))
	if !ok || errI != nil || errN != nil {
		return Shard{}, fmt.Errorf("shard %q: write it I/N, shard I of N counted from 0, such as 0/3", s)
	}
	if count < 1 {
		return Shard{}, fmt.Errorf("shard %q: a search has 1 shard or more: give I/N with N >= 1", s)
	}
	sh := Shard{Index: index, Count: count}
	return sh, sh.validate()
}

// String writes the shard as ParseShard reads it; the whole search is
// "".
func (s Shard) String() string {
	if !s.sharded() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Set and String make a *Shard a flag.Value.
func (s *Shard) Set(v string) error {
	sh, err := ParseShard(v)
	if err != nil {
		return err
	}
	*s = sh
	return nil
}

func (s Shard) validate() error {
	switch {
	case s == Shard{}:
		return nil
	case s.Count < 1:
		return fmt.Errorf("shard %d/%d: a search has 1 shard or more: give I/N with N >= 1", s.Index, s.Count)
	case s.Index < 0 || s.Index >= s.Count:
		return fmt.Errorf("shard %d/%d: the index counts from 0 to N-1: give 0/%d to %d/%d", s.Index, s.Count, s.Count, s.Count-1, s.Count)
	}
	return nil
}

// sharded: the search runs only part of its plans.
func (s Shard) sharded() bool { return s.Count > 1 }

// runs reports whether plan i of the search is this shard's.
func (s Shard) runs(i int) bool { return !s.sharded() || i%s.Count == s.Index }

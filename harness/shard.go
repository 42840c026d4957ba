package harness

import (
	"fmt"
	"os"
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

// Shard is a part of a search: the plans whose index is Index mod Count.
// The zero Shard, and any of Count 1, is the whole search.
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

// jobIndexEnv is the variable a Kubernetes Indexed Job gives each pod its
// completion index in.
const jobIndexEnv = "JOB_COMPLETION_INDEX"

// shardOfJob is the shard of a search given shard (zero: not given) and
// count (the -shards setting; 0: not given), in a pod of an Indexed Job
// when JOB_COMPLETION_INDEX is set: its index is the job's, its count
// that of the shard or of count. A shard given that disagrees with the
// job's index, or a job index with no count, is an error.
func shardOfJob(shard Shard, count int) (Shard, error) {
	if count < 0 {
		return Shard{}, fmt.Errorf("the shard count is %d: give the number of shards, 1 or more", count)
	}
	if shard.Count > 0 && count > 0 && shard.Count != count {
		return Shard{}, fmt.Errorf("shard %s and a count of %d shards disagree: give one of them", shard, count)
	}
	job, inJob := os.LookupEnv(jobIndexEnv)
	if !inJob || job == "" {
		if shard.Count == 0 && count > 0 {
			return Shard{}, fmt.Errorf("a count of %d shards without the shard's index: give -shard I/%d, or run in an Indexed Job (which sets $%s)", count, count, jobIndexEnv)
		}
		return shard, nil
	}
	index, err := strconv.Atoi(job)
	if err != nil || index < 0 {
		return Shard{}, fmt.Errorf("$%s is %q: not a completion index (0, 1, ...)", jobIndexEnv, job)
	}
	switch {
	case shard.Count > 0 && shard.Index != index:
		return Shard{}, fmt.Errorf("shard %s disagrees with $%s=%d: give -shard %d/%d, or no -shard (the job's index is taken)", shard, jobIndexEnv, index, index, shard.Count)
	case shard.Count > 0:
		return shard, nil
	case count == 0:
		return Shard{}, fmt.Errorf("$%s is set (%d) but no shard count: give -shards N (env %s), the job's completions", jobIndexEnv, index, EnvTwin("shards"))
	}
	sh := Shard{Index: index, Count: count}
	return sh, sh.validate()
}
